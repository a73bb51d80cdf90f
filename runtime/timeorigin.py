"""One origin for a scaled timeline, shared by every process through a ConfigMap.

A process running at a time scale K computes its time as origin + K x (wall - origin)
(`runtime.clock.scaled_time`). If the origin were each process's own start, a
restarted process would start a new timeline and move every deadline the others
keep. So the first scaled process records the origin in a ConfigMap (create,
which fails if another process created it first) and every process, restarted
or not, reads it from there. The ConfigMap lives as long as the API server's
data; deleting it starts a new timeline at the next process start."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from runtime.clock import LoopClock, wall_clock
from runtime.errors import ApiError
from runtime.lease import micro_time

ORIGIN_KEY = "origin"


class OriginApi(Protocol):
    """What this needs of runtime.transport.Transport."""

    async def request(self, method: str, path: str, *, body: object = None) -> dict[str, Any]: ...


def _path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    return f"{base}/{name}" if name else base


def _parse(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z")


def _read(configmap: dict[str, Any], where: str) -> datetime:
    text = str((configmap.get("data") or {}).get(ORIGIN_KEY, ""))
    try:
        return _parse(text)
    except ValueError:
        raise ValueError(f"ConfigMap {where}: {ORIGIN_KEY} {text!r} is not a time") from None


async def shared_origin(api: OriginApi, namespace: str, name: str, now: datetime) -> datetime:
    """The recorded origin; `now` becomes it when none is recorded yet."""
    for _ in range(2):  # a ConfigMap deleted between our create and read: once more
        try:
            found = await api.request("GET", _path(namespace, name))
        except ApiError as err:
            if err.status != 404:
                raise
        else:
            return _read(found, f"{namespace}/{name}")
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {ORIGIN_KEY: micro_time(now)},
        }
        try:
            await api.request("POST", _path(namespace), body=body)
            return now
        except ApiError as err:
            if err.status != 409:
                raise  # AlreadyExists: another process recorded it first; read it
    raise ApiError(409, "Conflict", f"ConfigMap {namespace}/{name} keeps changing")


async def scaled_clock(api: OriginApi, namespace: str, name: str, scale: float) -> LoopClock:
    """The loop's clock at `scale`, on the timeline every process shares; at scale 1 the
    wall clock itself, and nothing is recorded."""
    if scale == 1.0:
        return LoopClock()
    return LoopClock(scale, origin=await shared_origin(api, namespace, name, wall_clock()))
