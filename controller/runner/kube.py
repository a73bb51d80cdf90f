"""The runner's view of the Kubernetes API: the Secrets of its namespace, nothing else.

It never touches Jobs: its result goes out as its container's termination message
(controller/runner/main.py), and its ServiceAccount holds no verb on Jobs, so a module
cannot rewrite any Job's result.

`Kube` is the role the op logic depends on (tests use an in-memory fake);
`TransportKube` serves it over `runtime.transport`. Writes of state must not be
lost to a momentary API failure after tofu has changed real infrastructure, so
every call retries transient errors for a while before giving up."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar
from urllib.parse import quote

from runtime.errors import ApiError, is_transient
from runtime.jsonobj import Json

T = TypeVar("T")

# Retry delays (seconds) for transient API errors: about a minute in all, longer
# than an API server restart takes. After SIGTERM the pod's grace period may cut
# this short; trying until killed still beats giving up at once.
RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)


class Kube(Protocol):
    """Secrets of the runner's namespace. Absent objects read as None;
    other failures raise `ApiError` (409 Conflict / AlreadyExists on a lost race)."""

    async def get_secret(self, name: str) -> Json | None: ...

    async def create_secret(self, body: Json) -> Json: ...

    async def replace_secret(self, name: str, body: Json) -> Json:
        """PUT; `body.metadata.resourceVersion`, when set, is a precondition."""
        ...

    async def delete_secret(self, name: str) -> None: ...

    async def list_secrets(self, label_selector: str) -> list[Json]: ...


def _is_retryable(exc: BaseException) -> bool:
    # A 409 here is an optimistic-concurrency or create race: retrying the same
    # body would fail the same way, so the caller decides.
    return is_transient(exc) and not (isinstance(exc, ApiError) and exc.status == 409)


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    delays: tuple[float, ...] = RETRY_DELAYS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """`call()`, retried after each delay while it fails transiently."""
    for delay in delays:
        try:
            return await call()
        except Exception as exc:
            if not _is_retryable(exc):
                raise
            wait = exc.retry_after if isinstance(exc, ApiError) and exc.retry_after else delay
            print(f"captf-runner: API call failed ({exc}); retrying in {wait:g}s", flush=True)
            await sleep(wait)
    return await call()


class Requests(Protocol):
    """What `TransportKube` needs of `runtime.transport.Transport`."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 -- the transport's per-request deadline
    ) -> Json: ...


class TransportKube:
    """`Kube` over a `Transport`, bound to one namespace."""

    def __init__(
        self, transport: Requests, namespace: str, *, delays: tuple[float, ...] = RETRY_DELAYS
    ) -> None:
        """`delays`: the waits after transient failures; () for a transport that waits
        them out itself (the command line's)."""
        self._t = transport
        self._secrets = f"/api/v1/namespaces/{quote(namespace)}/secrets"
        self._delays = delays

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        return await retrying(call, delays=self._delays)

    async def _get(self, path: str) -> Json | None:
        try:
            return await self._retrying(lambda: self._t.request("GET", path))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def get_secret(self, name: str) -> Json | None:
        return await self._get(f"{self._secrets}/{quote(name)}")

    async def create_secret(self, body: Json) -> Json:
        return await self._retrying(lambda: self._t.request("POST", self._secrets, body=body))

    async def replace_secret(self, name: str, body: Json) -> Json:
        path = f"{self._secrets}/{quote(name)}"
        return await self._retrying(lambda: self._t.request("PUT", path, body=body))

    async def delete_secret(self, name: str) -> None:
        try:
            await self._retrying(
                lambda: self._t.request("DELETE", f"{self._secrets}/{quote(name)}")
            )
        except ApiError as exc:
            if exc.status != 404:
                raise

    async def list_secrets(self, label_selector: str) -> list[Json]:
        params = {"labelSelector": label_selector}
        listed = await self._retrying(lambda: self._t.request("GET", self._secrets, params=params))
        items = listed.get("items") or []
        return [item for item in items if isinstance(item, dict)]
