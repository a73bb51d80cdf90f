"""One origin for a scaled timeline, shared by every process through a ConfigMap.

A process running at a time scale K computes its time as origin + K x (wall - origin)
(`runtime.clock.scaled_time`). If the origin were each process's own start, a
restarted process would start a new timeline and move every deadline the others
keep. So the first scaled process records the origin in a ConfigMap (create,
which fails if another process created it first) and every process, restarted
or not, reads it from there. The ConfigMap lives as long as the API server's
data; deleting it starts a new timeline at the next process start.

This is the first thing a controller asks the API server, often while it is
still coming up: transient failures (`runtime.errors.is_transient`) are retried
with the reflector's backoff, for as long as they last. Anything else (refused
by RBAC, an origin that is not a time) is an `OriginError`: a configuration to
fix, said in one line."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Protocol

import anyio

from runtime.cache.backoff import backoff_delay
from runtime.clock import LoopClock, wall_clock
from runtime.errors import ApiError, is_transient
from runtime.lease import micro_time

log = logging.getLogger(__name__)
ORIGIN_KEY = "origin"


class OriginError(Exception):
    """The origin cannot be read for a reason waiting will not change."""


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
        raise OriginError(f"ConfigMap {where}: {ORIGIN_KEY} {text!r} is not a time") from None


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
    wall clock itself, and nothing is recorded. Waits out transient failures; raises
    OriginError for any other."""
    if scale == 1.0:
        return LoopClock()
    where = f"ConfigMap {namespace}/{name}"
    failures = 0
    while True:
        try:
            origin = await shared_origin(api, namespace, name, wall_clock())
        except Exception as err:
            if not is_transient(err):
                if isinstance(err, ApiError):
                    raise OriginError(f"{where}: {err}") from None
                raise  # OriginError already, or a bug: its traceback is wanted
            failures += 1
            delay = backoff_delay(failures)
            log.info("%s: %s; retrying in %.1f s", where, err, delay)
            await anyio.sleep(delay)
        else:
            return LoopClock(scale, origin=origin)
