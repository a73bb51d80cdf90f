"""A small recorder of core/v1 Events, and an error reporter for the loop built on it.

Events are best effort, as in client-go: a failure to write one is logged and
never fails the caller's work."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal, Protocol, TypedDict

from runtime.clock import Clock

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]

# Long messages are cut: an Event is a pointer for `kubectl describe`, not a log,
# and events.k8s.io/v1 caps its note at 1 kB.
MESSAGE_LIMIT = 1024
# An Event about a cluster-scoped object lives in the default namespace.
CLUSTER_SCOPED_NAMESPACE = "default"


class ObjectReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    namespace: str
    uid: str
    resourceVersion: str


def object_reference(obj: Mapping[str, Any]) -> ObjectReference:
    """A reference to a raw API object (as read from a cache or the API)."""
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    ref = ObjectReference(apiVersion=obj["apiVersion"], kind=obj["kind"], name=meta["name"])
    for key in ("namespace", "uid", "resourceVersion"):
        if meta.get(key):
            ref[key] = meta[key]
    return ref


def _time(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    ref: ObjectReference,
    *,
    type_: EventType,
    reason: str,
    message: str,
    component: str,
    instance: str,
    now: datetime,
) -> dict[str, Any]:
    """The core/v1 Event to POST. Pure."""
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{ref['name']}.",
            "namespace": ref.get("namespace", CLUSTER_SCOPED_NAMESPACE),
        },
        "involvedObject": dict(ref),
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance,
        "firstTimestamp": _time(now),
        "lastTimestamp": _time(now),
        "count": 1,
    }


class EventApi(Protocol):
    """What the recorder needs of runtime.transport.Transport."""

    async def request(self, method: str, path: str, *, body: object = None) -> dict[str, Any]: ...


class EventRecorder:
    def __init__(
        self, api: EventApi, *, component: str, clock: Clock, instance: str | None = None
    ) -> None:
        self._api = api
        self._component = component
        self._instance = instance or socket.gethostname()
        self._clock = clock

    async def event(
        self, ref: ObjectReference, type_: EventType, reason: str, message: str
    ) -> None:
        body = event_body(
            ref,
            type_=type_,
            reason=reason,
            message=message,
            component=self._component,
            instance=self._instance,
            now=self._clock.now(),
        )
        path = f"/api/v1/namespaces/{body['metadata']['namespace']}/events"
        try:
            await self._api.request("POST", path, body=body)
        except Exception as error:
            log.warning("event %s %s on %s not recorded: %s", type_, reason, ref["name"], error)

    async def normal(self, ref: ObjectReference, reason: str, message: str) -> None:
        await self.event(ref, "Normal", reason, message)

    async def warning(self, ref: ObjectReference, reason: str, message: str) -> None:
        await self.event(ref, "Warning", reason, message)


class EventErrorReporter:
    """An `ErrorReporter` for runtime.loop: a Warning Event on the object a key names.

    `lookup` finds the object for a key (usually a cache read); a key whose
    object is gone gets no Event."""

    def __init__(
        self,
        recorder: EventRecorder,
        lookup: Callable[[str], Mapping[str, Any] | None],
        *,
        reason: str = "ReconcileError",
    ) -> None:
        self._recorder = recorder
        self._lookup = lookup
        self._reason = reason

    async def unrecognized_error(self, key: str, error: Exception) -> None:
        obj = self._lookup(key)
        if obj is None:
            return
        message = f"{type(error).__name__}: {error}"
        await self._recorder.warning(object_reference(obj), self._reason, message)
