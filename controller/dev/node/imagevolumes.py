"""A container's image volumes (`volumes[].image`): pulled before it starts, with the
kubelet's image back-off between failed attempts.

The container does not start until every image volume it mounts is in the node's
cache. A failed pull shows on the container, as a kubelet shows it: Waiting
`ErrImagePull` with the error, and a moment later (the kubelet's next pod sync)
`ImagePullBackOff` until the back-off ends: 10 s after the first failure, doubling
to 300 s. Errors no retry can mend keep their own reason (`InvalidImageName`,
`ErrImageNeverPull`) and are retried on the same schedule, in case the pod's image
appears in the cache. A success resets the back-off.

Each volume resolves to the pulled image's root directory in the cache, shared
by every pod that mounts the same digest and made read-only there."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Protocol

from controller.dev.node.podstatus import Waiting
from controller.dev.node.pull import Pulled, PullFailed
from controller.dev.node.reference import backoff_delays, policy_of
from runtime.clock import Clock
from runtime.jsonobj import Json

# How long ErrImagePull shows before ImagePullBackOff: the kubelet's next pod sync.
ERR_IMAGE_PULL_SECONDS = 2.0


class Pulls(Protocol):
    """`pull.Puller`: the node's image cache."""

    async def pull(self, image: str, policy: str, docker_config: Path | None = None) -> Pulled: ...


class ImageVolumes:
    def __init__(
        self,
        sources: Mapping[str, Json],
        puller: Pulls,
        clock: Clock,
        report: Callable[[Waiting], None],
        credentials: Callable[[], Awaitable[Path | None]] | None = None,
    ) -> None:
        """`credentials`: the directory of a Docker config file for the pulls, asked at
        each attempt (the pod's imagePullSecrets, see `pullsecrets`)."""
        self._sources = dict(sources)
        self._puller = puller
        self._clock = clock
        self._report = report
        self._credentials = credentials
        self._delays: Iterator[float] = backoff_delays()

    async def paths(self) -> dict[str, Path]:
        """Volume name -> the image's root; raises PullFailed for the first that fails."""
        paths: dict[str, Path] = {}
        if not self._sources:
            return paths
        docker_config = await self._credentials() if self._credentials else None
        for name, source in self._sources.items():
            image = str(source.get("reference") or "")
            try:
                policy = policy_of(image, source.get("pullPolicy"))
                pulled = await self._puller.pull(image, policy, docker_config)
            except ValueError as exc:
                where = f"volume {name}: " if name else ""  # "": the container's own image
                raise PullFailed(f"{where}{exc}", "InvalidImageName") from None
            except PullFailed as exc:
                raise PullFailed(f'failed to pull image "{image}": {exc}', exc.reason) from None
            paths[name] = pulled.rootfs
        self._delays = backoff_delays()
        return paths

    async def back_off(self, failed: PullFailed) -> None:
        """Show `failed` and wait out the back-off; the caller tries again after."""
        delay = next(self._delays)
        self._report(Waiting(failed.reason, str(failed)))
        if failed.reason != "ErrImagePull":
            await self._clock.sleep(delay)
            return
        shown = min(ERR_IMAGE_PULL_SECONDS, delay)
        await self._clock.sleep(shown)
        self._report(Waiting("ImagePullBackOff", f"Back-off pulling image: {failed}"))
        await self._clock.sleep(delay - shown)
