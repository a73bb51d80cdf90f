"""The executor's API calls: Job status through the `status` subresource, Secrets and
ConfigMaps for the environment. Raw JSON over the transport."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from runtime.clock import Clock
from runtime.errors import ApiError, is_transient

logger = logging.getLogger("controller.executor")

Json = dict[str, Any]

# Transient failures (5xx, 429, timeouts, refused connections: an API server restarting)
# are retried with these delays, in clock seconds, the last one repeated.
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0)
# Long enough to ride out an API server restart; a write that still fails is given up.
MAX_ATTEMPTS = 20


class Requester(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 -- the transport's per-request deadline
        accept: str = "application/json",
    ) -> dict[str, Any]: ...


def job_path(namespace: str, name: str) -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"


class KubeJobs:
    def __init__(self, transport: Requester, clock: Clock) -> None:
        self._transport = transport
        self._clock = clock

    async def update_status(
        self, namespace: str, name: str, uid: str, build: Callable[[Json], Json | None]
    ) -> Json | None:
        """PUT the whole Job to /status: the resourceVersion it was read at makes the
        write conditional, so a concurrent change (the runner's result annotation) is
        re-read and `build` re-applied, never overwritten."""
        path = job_path(namespace, name)

        async def attempt() -> Json | None:
            job = await self._transport.request("GET", path)
            if job.get("metadata", {}).get("uid") != uid:
                return None
            status = build(job.get("status") or {})
            if status is None:
                return None
            job["status"] = status
            written = await self._transport.request("PUT", f"{path}/status", body=job)
            result: Json = written.get("status") or {}
            return result

        return await self._retrying(f"status of Job {namespace}/{name}", attempt)

    async def read(self, kind: str, namespace: str, name: str) -> Json | None:
        path = f"/api/v1/namespaces/{namespace}/{kind}/{name}"

        async def attempt() -> Json | None:
            return await self._transport.request("GET", path)

        return await self._retrying(f"{kind} {namespace}/{name}", attempt)

    async def _retrying(
        self, what: str, attempt: Callable[[], Awaitable[Json | None]]
    ) -> Json | None:
        """`attempt()` until it returns; None on 404; transient failures retried."""
        for number in range(MAX_ATTEMPTS):
            try:
                return await attempt()
            except ApiError as exc:
                if exc.status == 404:
                    return None
                if not is_transient(exc):
                    logger.error("%s: %s", what, exc)
                    raise
                await self._pause(number, exc)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                await self._pause(number, exc)
        raise TimeoutError(f"{what}: gave up after {MAX_ATTEMPTS} attempts")

    async def _pause(self, attempt: int, exc: BaseException) -> None:
        # A conflict needs no wait: the re-read is the fix.
        if isinstance(exc, ApiError) and exc.status == 409:
            return
        delay = RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)]
        if isinstance(exc, ApiError) and exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        logger.debug("retrying in %.1fs after %s", delay, exc)
        await self._clock.sleep(delay)
