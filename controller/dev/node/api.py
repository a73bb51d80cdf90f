"""The node's API calls, raw JSON over the transport: binding, pod status, the final
delete, Secrets and ConfigMaps for environments and volumes, and TokenRequests.

Transient failures (409, 429, 5xx, timeouts, refused connections: an API server
restarting) are retried; a 404 means the object is gone and is answered with None."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from controller.io.api import CONFIGMAPS, PODS, SECRETS, SERVICE_ACCOUNTS, resource_path
from runtime.clock import Clock
from runtime.errors import ApiError, is_transient
from runtime.jsonobj import Json

logger = logging.getLogger("controller.dev.node")


# Delays between attempts, in seconds, the last one repeated.
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0)
# Long enough to ride out an API server restart; a write that still fails is given up.
MAX_ATTEMPTS = 20
# What `read` reads, by plural: what a pod's env and volumes refer to.
_READABLE = {r.plural: r for r in (SECRETS, CONFIGMAPS)}


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


class NodeApi:
    def __init__(self, transport: Requester, clock: Clock) -> None:
        self._transport = transport
        self._clock = clock

    async def bind(self, pod: Json, node: str) -> bool:
        """Bind the pod to `node`; False when it is gone or someone bound it first."""
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = resource_path(PODS, meta["namespace"], meta["name"], sub="binding")
        try:
            await self._transport.request("POST", path, body=body)
        except ApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    async def update_pod_status(
        self, namespace: str, name: str, uid: str, build: Callable[[Json], Json | None]
    ) -> Json | None:
        """PUT `build(pod)` as the pod's status; the resourceVersion read makes the write
        conditional, so a condition someone else added (DisruptionTarget) is re-read and
        kept, never overwritten. None when `build` declines or the pod (uid) is gone."""
        path = resource_path(PODS, namespace, name)
        status_path = resource_path(PODS, namespace, name, sub="status")

        async def attempt() -> Json | None:
            pod = await self._transport.request("GET", path)
            if pod.get("metadata", {}).get("uid") != uid:
                return None
            status = build(pod)
            if status is None:
                return None
            pod["status"] = status
            return await self._transport.request("PUT", status_path, body=pod)

        return await self._retrying(f"status of pod {namespace}/{name}", attempt)

    async def finish_delete(self, namespace: str, name: str, uid: str) -> None:
        """The kubelet's last word on a deleted pod: delete it now (grace 0), this uid only."""
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        path = resource_path(PODS, namespace, name)

        async def attempt() -> Json | None:
            try:
                return await self._transport.request("DELETE", path, body=body)
            except ApiError as exc:
                # Another pod of that name: ours is gone already.
                if exc.status == 409 and exc.reason == "Conflict" and "UID" in exc.message:
                    return None
                raise

        await self._retrying(f"delete of pod {namespace}/{name}", attempt)

    async def read(self, kind: str, namespace: str, name: str) -> Json | None:
        path = resource_path(_READABLE[kind], namespace, name)

        async def attempt() -> Json | None:
            return await self._transport.request("GET", path)

        return await self._retrying(f"{kind} {namespace}/{name}", attempt)

    async def mint_token(self, pod: Json, audience: str | None, expiration_seconds: int) -> str:
        meta = pod["metadata"]
        account = pod.get("spec", {}).get("serviceAccountName") or "default"
        path = resource_path(SERVICE_ACCOUNTS, meta["namespace"], account, sub="token")
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience] if audience else [],
                "expirationSeconds": expiration_seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"]}
                | {"uid": meta["uid"]},
            },
        }

        async def attempt() -> Json | None:
            return await self._transport.request("POST", path, body=body)

        answer = await self._retrying(f"token for {meta['namespace']}/{account}", attempt)
        if answer is None:
            raise LookupError(f"serviceaccount {meta['namespace']}/{account} not found")
        return str(answer["status"]["token"])

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
