"""A scripted stand-in for the API server's list and watch endpoints.

Lists and watches are answered from scripts, in order; every call is recorded
with its parameters so tests can assert where each watch started. Once a
script runs out, a call hangs (as an idle server would) until cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

from runtime.errors import ApiError


class Hang:
    """A watch step: the server sends nothing more and keeps the connection open."""


HANG = Hang()
# A watch step is a line the server sends, a pause of a few seconds, an error that breaks
# the connection mid-stream, or HANG. A watch is steps, or an exception raised on entry.
Step = bytes | float | BaseException | Hang
WatchScript = Sequence[Step] | BaseException


def obj(name: str, rv: int, *, namespace: str = "ns", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(rv),
            "labels": dict(labels),
        },
    }


def event(kind: str, body: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": body})


def bookmark(rv: int) -> bytes:
    return event("BOOKMARK", {"kind": "Job", "metadata": {"resourceVersion": str(rv)}})


def error_event(code: int, reason: str, **details: Any) -> bytes:
    status = {"kind": "Status", "code": code, "reason": reason, "message": reason}
    if details:
        status["details"] = details
    return event("ERROR", status)


def page(items: Sequence[dict[str, Any]], rv: int, token: str = "") -> dict[str, Any]:
    metadata: dict[str, str] = {"resourceVersion": str(rv)}
    if token:
        metadata["continue"] = token
    # Like the API server: items in a list carry no kind/apiVersion of their own.
    bare = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")} for item in items]
    return {"kind": "JobList", "apiVersion": "batch/v1", "metadata": metadata, "items": bare}


def gone(reason: str = "Expired") -> ApiError:
    return ApiError(410, reason, "too old resource version")


@dataclass
class ScriptedApi:
    lists: list[dict[str, Any] | BaseException] = field(default_factory=list)
    watches: list[WatchScript] = field(default_factory=list)
    # ("list" | "watch", params, loop time of the call)
    calls: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def params_of(self, kind: str) -> list[dict[str, str]]:
        return [params for call, params, _ in self.calls if call == kind]

    def times_of(self, kind: str) -> list[float]:
        return [at for call, _, at in self.calls if call == kind]

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        assert method == "GET"
        self.calls.append(("list", dict(params or {}), asyncio.get_running_loop().time()))
        if not self.lists:
            await asyncio.Event().wait()
        answer = self.lists.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return orjson.loads(orjson.dumps(answer))  # type: ignore[no-any-return]

    @asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str], accept: str = "application/json"
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        self.calls.append(("watch", dict(params), asyncio.get_running_loop().time()))
        script: WatchScript = self.watches.pop(0) if self.watches else [HANG]
        if isinstance(script, BaseException):
            raise script
        yield _play(script)


async def _play(steps: Sequence[Step]) -> AsyncIterator[bytes]:
    for step in steps:
        if isinstance(step, bytes):
            yield step
        elif isinstance(step, float):
            await asyncio.sleep(step)
        elif isinstance(step, Hang):
            await asyncio.Event().wait()
        else:
            raise step
