"""The version skew policy: a controller runs its own release's runner and the one before;
a newer one, or an older one still, waits JobPolicyInvalid saying so."""

from __future__ import annotations

import pytest

from controller.core.basics.release import RELEASE
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.steps import decide
from controller.core.spec.skew import release_of, runner_release, skew_refusal
from tests.builders import NOW, base_objects, captf


@pytest.mark.parametrize(
    ("image", "release"),
    [
        ("captf:v0.1.0", (0, 1)),
        ("captf:0.2.3", (0, 2)),
        ("ghcr.io/captf-io/captf:v1.12.0-rc.1", (1, 12)),
        ("registry:5000/team/captf:v0.3.0@sha256:" + "a" * 64, (0, 3)),
        ("captf:dev", None),
        ("captf", None),
        ("captf@sha256:" + "a" * 64, None),
        ("team/runner:v9.0.0", None),  # not ours: not checked
        ("captf:v01.2.0", None),
    ],
)
def test_the_runner_release_is_read_from_the_tag_of_our_image(
    image: str, release: tuple[int, int] | None
) -> None:
    assert runner_release(image) == release


@pytest.mark.parametrize(
    ("controller", "image", "refused"),
    [
        ("0.2.0", "captf:v0.2.0", None),
        ("0.2.0", "captf:v0.2.7", None),  # a patch release is the same runner
        ("0.2.1", "captf:v0.1.0", None),  # one release older: read correctly
        ("0.2.0", "captf:v0.3.0", "newer than this controller (0.2.0)"),
        ("0.2.0", "captf:v1.0.0", "newer than this controller (0.2.0)"),
        ("0.3.0", "captf:v0.1.0", "runs its own release's and the one before"),
        ("1.0.0", "captf:v0.9.0", "runs its own release's and the one before"),
        ("0.2.0", "captf:dev", None),
        ("0.2.0", "team/runner:v0.9.0", None),
    ],
)
def test_the_skew_policy(controller: str, image: str, refused: str | None) -> None:
    found = skew_refusal(image, controller)
    if refused is None:
        assert found is None
    else:
        assert found is not None
        assert refused in found
        assert found.startswith(f"spec.jobs.image {image!r} is a runner of release")


def test_this_release_is_a_version() -> None:
    assert release_of(RELEASE) is not None


def test_a_newer_runner_waits_job_policy_invalid_before_any_job() -> None:
    major, minor = release_of(RELEASE) or (0, 0)
    image = f"captf:v{major}.{minor + 1}.0"
    obj = captf(spec={"jobs": {"image": image}, "variables": {"size": 4}})
    out = to_json(decide(snapshot.build(obj, base_objects()), NOW), verbose=True)
    message = out.pop("message")
    assert out == {"action": "requeue", "reason": "JobPolicyInvalid", "after": 600.0}
    assert "upgrade the controller first" in message


def test_the_release_before_runs() -> None:
    major, minor = release_of(RELEASE) or (0, 0)
    obj = captf(spec={"jobs": {"image": f"captf:v{major}.{minor - 1}.0"}, "variables": {"size": 4}})
    out = to_json(decide(snapshot.build(obj, base_objects()), NOW))
    assert out["action"] == "run"
