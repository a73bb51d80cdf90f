"""The controller's writes to the API server, each one request with a clear contract,
and the paths of every resource controller/ reads or writes.

Every write that can race carries a resourceVersion precondition (a 409 is
transient: the work queue retries through its rate limiter); creates of
deterministically named objects treat AlreadyExists as success.

Paths are built here only, from the resources below: moving CAPTF's kinds to another
API group is the change of GROUP and VERSION in core/basics/names.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Protocol

from controller.core import Event
from controller.core.basics.names import (
    CAPI_GROUP,
    CAPI_KINDS,
    CAPI_PLURALS,
    CAPI_VERSION,
    GROUP,
    IDENTITY_PLURAL,
    KINDS,
    PLAN_PLURAL,
    PLURALS,
    POLICY_PLURAL,
    TEMPLATE_PLURALS,
    VERSION,
)
from runtime import events
from runtime.cache.resource import Resource
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.transport import MERGE_PATCH

MERGE = MERGE_PATCH

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


# The resources controller/ reads or writes, by the API group, version and plural that
# locate them; the core group is "".
OBJECTS: Final = {kind: Resource(GROUP, VERSION, PLURALS[kind]) for kind in KINDS}
# The templates Cluster API clones from: read, and their status written (scale from zero).
TEMPLATES: Final = {kind: Resource(GROUP, VERSION, p) for kind, p in TEMPLATE_PLURALS.items()}
# Cluster API's Cluster, Machine and MachinePool: read only, never written.
CAPI_OBJECTS: Final = {
    kind: Resource(CAPI_GROUP, CAPI_VERSION, CAPI_PLURALS[kind]) for kind in CAPI_KINDS
}
# The TerraformPlans: created, their status written and the finished ones pruned.
PLANS: Final = Resource(GROUP, VERSION, PLAN_PLURAL)
# The cluster-scoped TerraformClusterIdentities: read, and their finalizer written.
IDENTITIES: Final = Resource(GROUP, VERSION, IDENTITY_PLURAL, namespaced=False)
# The cluster-scoped TerraformPolicies: read only.
POLICIES: Final = Resource(GROUP, VERSION, POLICY_PLURAL, namespaced=False)
JOBS: Final = Resource("batch", "v1", "jobs")
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases")
SECRETS: Final = Resource("", "v1", "secrets")
CONFIGMAPS: Final = Resource("", "v1", "configmaps")
EVENTS: Final = Resource("", "v1", "events")
PODS: Final = Resource("", "v1", "pods")
SERVICE_ACCOUNTS: Final = Resource("", "v1", "serviceaccounts")
ROLE_BINDINGS: Final = Resource("rbac.authorization.k8s.io", "v1", "rolebindings")
NAMESPACES: Final = Resource("", "v1", "namespaces", namespaced=False)
NODES: Final = Resource("", "v1", "nodes", namespaced=False)
DEPLOYMENTS: Final = Resource("apps", "v1", "deployments")
# Every kind of CAPTF's group, by its CRD's name: rewritten in the storage version by the
# storage version migration (migration.py); a test holds it to manifests/crds/.
CLUSTER_TEMPLATES: Final = Resource(GROUP, VERSION, "terraformclustertemplates")
STORED: Final = (
    *OBJECTS.values(),
    *TEMPLATES.values(),
    CLUSTER_TEMPLATES,
    PLANS,
    IDENTITIES,
    POLICIES,
)
CRDS: Final = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)


def resource_path(
    resource: Resource, namespace: str | None = None, name: str = "", *, sub: str = ""
) -> str:
    """The collection in `namespace` (every namespace when None; none for a cluster-scoped
    resource), the object `name` in it, or, with `sub`, that object's subresource."""
    out = resource.path(namespace)
    out = f"{out}/{name}" if name else out
    return f"{out}/{sub}" if sub else out


def object_path(kind: str, namespace: str | None, name: str = "") -> str:
    """A CAPTF object (or, without `name`, its kind's collection)."""
    return resource_path(OBJECTS[kind], namespace, name)


def status_path(obj: Json) -> str:
    """The status subresource of the CAPTF object `obj`."""
    meta = obj["metadata"]
    return resource_path(OBJECTS[obj["kind"]], meta["namespace"], meta["name"], sub="status")


def job_path(namespace: str | None, name: str = "") -> str:
    return resource_path(JOBS, namespace, name)


def secret_path(namespace: str | None, name: str = "") -> str:
    return resource_path(SECRETS, namespace, name)


def plan_path(namespace: str | None, name: str = "", *, sub: str = "") -> str:
    return resource_path(PLANS, namespace, name, sub=sub)


def lease_path(namespace: str | None, name: str = "") -> str:
    return resource_path(LEASES, namespace, name)


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
    body = {"status": patch}
    return await api.request("PATCH", status_path(obj), body=body, content_type=MERGE)


async def patch_secret(api: Api, namespace: str, name: str, patch: Json) -> None:
    """A merge patch of a Secret's metadata, without a precondition: it names only the
    labels, annotations or owners it sets, so applying it over a newer version is the
    same as over the one read. A Secret already gone is fine (nothing left to mark)."""
    try:
        await merge_patch(api, secret_path(namespace, name), patch)
    except ApiError as err:
        if err.status != 404:
            raise


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
    return await create(api, resource_path(EVENTS, body["metadata"]["namespace"]), body) is not None
