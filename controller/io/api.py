"""The controller's writes to the API server, each one request with a clear contract.

Every write that can race carries a resourceVersion precondition (a 409 is
transient: the work queue retries through its rate limiter); creates of
deterministically named objects treat AlreadyExists as success."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from controller.core.names import (
    API_VERSION,
    LABEL_CLUSTER,
    LABEL_SCOPE,
    PLURALS,
)
from controller.core.timefmt import format_time
from runtime.errors import ApiError

Json = dict[str, Any]
MERGE = "application/merge-patch+json"
# Where the Job that holds a run slot lives (the holder identity is the Job's name alone).
ANN_HOLDER_NAMESPACE = "captf.io/holder-namespace"


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


async def put_status(api: Api, obj: Json, status: Json) -> Json:
    """Replaces the status; the object's resourceVersion is the precondition."""
    meta = obj["metadata"]
    body = obj | {"status": status}
    path = object_path(obj["kind"], meta["namespace"], meta["name"]) + "/status"
    return await api.request("PUT", path, body=body)


async def delete_job(api: Api, namespace: str, name: str) -> None:
    """Deletes a finished Job and its pod; a Job already gone is fine."""
    try:
        await api.request(
            "DELETE", job_path(namespace, name), body={"propagationPolicy": "Background"}
        )
    except ApiError as err:
        if err.status != 404:
            raise


def lease_body(
    namespace: str, name: str, holder: str, now: datetime, labels: dict[str, str]
) -> Json:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"holderIdentity": holder, "acquireTime": _micro(now), "renewTime": _micro(now)},
    }


def _micro(now: datetime) -> str:
    # Lease times are MicroTime: RFC 3339 with microseconds.
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def take_lease(api: Api, current: Json | None, body: Json) -> Json:
    """Create the Lease, or take a free one over with its resourceVersion as precondition.

    The caller checked (from its cache) that `current` is free or already ours; a
    409 means someone else took it meanwhile and the reconcile is retried. Returns the
    Lease as written."""
    meta = body["metadata"]
    if current is None:
        created = await create(api, lease_path(meta["namespace"]), body)
        if created is None:
            raise ApiError(409, "Conflict", f"Lease {meta['name']} was created meanwhile")
        return created
    update = current | {"spec": (current.get("spec") or {}) | body["spec"]}
    labels = (current["metadata"].get("labels") or {}) | meta.get("labels", {})
    update["metadata"] = current["metadata"] | {"labels": labels}
    notes = meta.get("annotations")
    if notes:
        update["metadata"]["annotations"] = (current["metadata"].get("annotations") or {}) | notes
    return await api.request("PUT", lease_path(meta["namespace"], meta["name"]), body=update)


async def write_lease(client: Api, current: Json | None, change: Json) -> Json:
    """Creates the Lease, or replaces `current` with `change` (its resourceVersion is the
    precondition). Either way a concurrent writer makes it fail with 409."""
    meta = change["metadata"]
    if current is None:
        created = await create(client, lease_path(meta["namespace"]), change)
        if created is None:
            raise ApiError(409, "Conflict", f"Lease {meta['name']} was created meanwhile")
        return created
    path = lease_path(meta["namespace"], meta["name"])
    return await client.request("PUT", path, body=change)


async def release_lease(api: Api, lease: Json) -> Json | None:
    """Clears the holder; the Lease object stays, so it is visible with kubectl.
    Returns the freed Lease (None when it was gone)."""
    meta = lease["metadata"]
    spec = dict(lease.get("spec") or {})
    spec.pop("holderIdentity", None)
    try:
        return await api.request(
            "PUT", lease_path(meta["namespace"], meta["name"]), body=lease | {"spec": spec}
        )
    except ApiError as err:
        if err.status != 404:
            raise
    return None


def op_lease_labels(cluster: str, scope: str) -> dict[str, str]:
    return {LABEL_CLUSTER: cluster, LABEL_SCOPE: scope}


def event_body(
    obj: Json, name: str, *, type_: str, reason: str, message: str, now: datetime
) -> Json:
    """A core/v1 Event with a deterministic name: a second create of it is refused,
    which is what makes "one Event per Job" hold across restarts."""
    meta = obj["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        },
        "type": type_,
        "reason": reason,
        "message": message[:1000],
        "source": {"component": "captf-controller"},
        "reportingComponent": "captf-controller",
        "reportingInstance": "captf-controller",
        "firstTimestamp": format_time(now),
        "lastTimestamp": format_time(now),
        "count": 1,
    }


async def record_event(api: Api, body: Json) -> bool:
    """Creates the Event once; False when it already existed."""
    path = f"/api/v1/namespaces/{body['metadata']['namespace']}/events"
    return await create(api, path, body) is not None
