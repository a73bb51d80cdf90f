"""A container's image volumes: pulled before it starts, ErrImagePull then
ImagePullBackOff on the kubelet's schedule while they fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.dev.node.imagevolumes import ImageVolumes
from controller.dev.node.podstatus import Waiting
from controller.dev.node.pull import Pulled, PullFailed
from controller.dev.node.pull import Puller as CachePuller
from runtime.clock import ManualClock


class Puller:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[tuple[str, str]] = []

    async def pull(self, image: str, policy: str, docker_config: Path | None = None) -> Pulled:
        self.calls.append((image, policy))
        if len(self.calls) <= self.failures:
            raise PullFailed("manifest unknown")
        return Pulled("sha256:" + "0" * 64, Path("/cache") / image, pulled=True)


class Recorder:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.states: list[tuple[float, Waiting]] = []

    def __call__(self, state: Waiting) -> None:
        self.states.append((self.clock.monotonic(), state))


async def test_each_volume_resolves_to_its_image_root_with_its_policy() -> None:
    clock = ManualClock()
    puller = Puller(failures=0)
    sources = {
        "mod": {"reference": "127.0.0.1:1/mod:v1"},
        "tip": {"reference": "127.0.0.1:1/tip", "pullPolicy": "Never"},
    }
    volumes = ImageVolumes(sources, puller, clock, Recorder(clock))
    paths = await volumes.paths()
    assert paths == {
        "mod": Path("/cache/127.0.0.1:1/mod:v1"),
        "tip": Path("/cache/127.0.0.1:1/tip"),
    }
    assert puller.calls == [("127.0.0.1:1/mod:v1", "IfNotPresent"), ("127.0.0.1:1/tip", "Never")]


async def test_failed_pulls_show_err_image_pull_then_back_off_10_20_40_seconds() -> None:
    clock = ManualClock()
    record = Recorder(clock)
    puller = Puller(failures=3)
    volumes = ImageVolumes({"mod": {"reference": "127.0.0.1:1/mod:v1"}}, puller, clock, record)
    for _ in range(3):
        with pytest.raises(PullFailed) as failed:
            await volumes.paths()
        await volumes.back_off(failed.value)
    assert await volumes.paths()

    starts = [at for at, state in record.states if state.reason == "ErrImagePull"]
    assert starts == [0, 10, 30]
    reasons = [state.reason for _, state in record.states]
    assert reasons == ["ErrImagePull", "ImagePullBackOff"] * 3
    first = record.states[0][1]
    assert first.message == 'failed to pull image "127.0.0.1:1/mod:v1": manifest unknown'
    assert record.states[1] == (
        2,
        Waiting("ImagePullBackOff", f"Back-off pulling image: {first.message}"),
    )
    assert clock.monotonic() == 70


async def test_a_bad_reference_is_invalid_and_never_backs_off_as_image_pull(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    record = Recorder(clock)
    puller = CachePuller(tmp_path, crane=None)
    volumes = ImageVolumes({"mod": {"reference": "ubuntu"}}, puller, clock, record)
    with pytest.raises(PullFailed) as failed:
        await volumes.paths()
    assert failed.value.reason == "InvalidImageName"
    await volumes.back_off(failed.value)
    assert [state.reason for _, state in record.states] == ["InvalidImageName"]
