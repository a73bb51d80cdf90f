"""The controller's writes to the API server, each one request with a clear contract.

Every write that can race carries a resourceVersion precondition (a 409 is
transient: the work queue retries through its rate limiter); creates of
deterministically named objects treat AlreadyExists as success."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from controller.core.basics.names import API_VERSION, PLURALS
from controller.core.plan.accounting import Event
from runtime import events
from runtime.errors import ApiError

Json = dict[str, Any]
MERGE = "application/merge-patch+json"
COMPONENT = "captf-controller"


class Api(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Any = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 -- the transport's per-request deadline
    ) -> dict[str, Any]: ...


def object_path(kind: str, namespace: str, name: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURALS[kind]}/{name}"


def job_path(namespace: str, name: str = "") -> str:
    base = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    return f"{base}/{name}" if name else base


def secret_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/secrets"
    return f"{base}/{name}" if name else base


def lease_path(namespace: str, name: str = "") -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{name}" if name else base


async def create(api: Api, path: str, body: Json) -> Json | None:
    """Create; None when an object of that name already exists."""
    try:
        return await api.request("POST", path, body=body)
    except ApiError as err:
        if err.status == 409 and err.reason == "AlreadyExists":
            return None
        raise


async def get_or_none(api: Api, path: str) -> Json | None:
    try:
        return await api.request("GET", path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise


async def merge_patch(api: Api, path: str, patch: Json, *, version: str | None = None) -> Json:
    if version:
        patch = patch | {"metadata": {**patch.get("metadata", {}), "resourceVersion": version}}
    return await api.request("PATCH", path, body=patch, content_type=MERGE)


async def patch_status(api: Api, obj: Json, patch: Json) -> Json:
    """A merge patch of the status subresource, without a precondition.

    The patch carries only the fields this pass changes (computed against the version
    it read), so a write from a cache that has not seen the previous write yet neither
    fails nor undoes it: the reconcile of one object runs on one worker at a time, and
    the status is the controller's alone. A resourceVersion precondition would only turn
    that lag into conflicts."""
    meta = obj["metadata"]
    path = object_path(obj["kind"], meta["namespace"], meta["name"]) + "/status"
    return await api.request("PATCH", path, body={"status": patch}, content_type=MERGE)


async def delete_job(api: Api, namespace: str, name: str) -> None:
    """Deletes a finished Job and its pod; a Job already gone is fine."""
    try:
        await api.request(
            "DELETE", job_path(namespace, name), body={"propagationPolicy": "Background"}
        )
    except ApiError as err:
        if err.status != 404:
            raise


async def replace_lease(client: Api, lease: Json) -> Json:
    """Replaces a Lease; its resourceVersion is the precondition (409 when it changed)."""
    meta = lease["metadata"]
    return await client.request("PUT", lease_path(meta["namespace"], meta["name"]), body=lease)


def event_body(obj: Json, event: Event, now: datetime) -> Json:
    """The core/v1 Event, under the plan's deterministic name: a second create of it is
    refused, which is what makes "one Event per Job" hold across restarts."""
    body = events.event_body(
        events.object_reference(obj),
        type_="Warning" if event.type == "Warning" else "Normal",
        reason=event.reason,
        message=event.message,
        component=COMPONENT,
        instance=COMPONENT,
        now=now,
    )
    body["metadata"] = {"name": event.name, "namespace": obj["metadata"]["namespace"]}
    return body


async def record_event(api: Api, body: Json) -> bool:
    """Creates the Event once; False when it already existed."""
    path = f"/api/v1/namespaces/{body['metadata']['namespace']}/events"
    return await create(api, path, body) is not None
