"""The informer table: what each informer of the controller lists and watches, keeps of
an object and files it under, one row per resource of the API's resource list
(controller/io/api.py). `Caches` (caches.py) builds its informers from these rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Final

from controller.core import CONFIGMAP, SECRET, capi_read
from controller.core.basics.names import (
    API_VERSION,
    CAPI_API_VERSION,
    CAPI_KINDS,
    IDENTITY,
    KINDS,
    LABEL_MANAGED_BY,
    LABEL_RUNNER,
    LABEL_RUNNER_RBAC,
    LABEL_SCOPE,
    LABEL_UID,
    MANAGER,
    PLAN_KIND,
    POLICY_KIND,
    RUNNER_RBAC_MANAGED,
    SCOPE_BUDGET,
    SCOPE_RUN_SLOT,
)
from controller.io import api
from controller.io.indexes import (
    CAPI_INDEXES,
    EVENT_INDEXES,
    JOB_INDEXES,
    LEASE_INDEXES,
    OBJECT_INDEXES,
    POD_INDEXES,
    RUNNER_INDEXES,
    SECRET_INDEXES,
)
from controller.io.trimming import (
    Transform,
    event_fields,
    job_fields,
    metadata_fields,
    own_secret_fields,
    pod_fields,
)
from runtime.cache import IndexFunc, Informer, Resource, Selection
from runtime.cache.namespaced import Namespaced
from runtime.cache.reflector import ListWatchTransport
from runtime.cache.resource import Obj
from runtime.clock import Clock
from runtime.jsonobj import Json


@dataclass(frozen=True, kw_only=True)
class InformerSpec:
    """One informer: what it lists and watches, what it keeps of each object, and the
    indexes it files them under."""

    resource: Resource
    labels: str | None = None  # its label selector
    fields: str | None = None  # its field selector
    # Narrowed further by a shard's selector (`--watch-label-selector`): the CAPTF objects,
    # and what CAPTF makes for them, which carry the object's labels of the selector's keys
    # (controller/core/spec/sharding.py). The user's Secrets and ConfigMaps do not.
    sharded: bool = False
    metadata_only: bool = False  # PartialObjectMetadata: the data is fetched on demand
    transform: Transform | None = None  # trimming.py
    indexes: Mapping[str, IndexFunc] = field(default_factory=dict)  # indexes.py

    def cache(
        self,
        transport: ListWatchTransport,
        *,
        clock: Clock,
        namespaces: tuple[str, ...] | None,
        shard: str | None,
    ) -> Informer:
        """Its informer over every namespace (None), one, or several (one watch each)."""
        if namespaces is None or len(namespaces) == 1:
            only = None if namespaces is None else namespaces[0]
            return self.informer(transport, clock=clock, namespace=only, shard=shard)
        return Namespaced(
            {
                ns: self.informer(transport, clock=clock, namespace=ns, shard=shard)
                for ns in namespaces
            }
        )

    def informer(
        self,
        transport: ListWatchTransport,
        *,
        clock: Clock,
        namespace: str | None,
        shard: str | None,
    ) -> Informer:
        narrowed = [self.labels, shard if self.sharded else None]
        selection = Selection(
            namespace=namespace if self.resource.namespaced else None,
            label_selector=",".join(s for s in narrowed if s) or None,
            field_selector=self.fields,
            metadata_only=self.metadata_only,
        )
        return Informer(
            transport,
            self.resource,
            clock=clock,
            selection=selection,
            indexers=self.indexes,
            transform=self.transform,
        )


def with_kind(obj: Obj, api_version: str, kind: str) -> Json:
    """List items come without apiVersion and kind; decisions and owner references need them."""
    if obj.get("kind") == kind and obj.get("apiVersion"):
        return obj
    return {"apiVersion": api_version, "kind": kind} | obj


# Kept with their kind: list items come without it, and the owner readers (refs.py) and
# the indexes built on them tell a TerraformCluster from a member by it.
OBJECTS: Final = {
    kind: InformerSpec(
        resource=api.OBJECTS[kind],
        sharded=True,
        transform=partial(with_kind, api_version=API_VERSION, kind=kind),
        indexes=OBJECT_INDEXES,
    )
    for kind in KINDS
}
# The templates, for their scale-from-zero status (controller/core/plan/templates.py).
# Not sharded: a template carries no shard label, and every shard that sees it writes
# the same status (the patch is idempotent, its Events are named once-only).
TEMPLATES: Final = {
    kind: InformerSpec(
        resource=resource,
        transform=partial(with_kind, api_version=API_VERSION, kind=kind),
    )
    for kind, resource in api.TEMPLATES.items()
}
# Only CAPTF's Jobs: they all carry the uid label.
JOBS: Final = InformerSpec(
    resource=api.JOBS,
    labels=LABEL_UID,
    sharded=True,
    transform=job_fields,
    indexes=JOB_INDEXES,
)
# The TerraformPlans, by their object's uid label; sharded like the Jobs.
PLANS: Final = InformerSpec(
    resource=api.PLANS,
    labels=LABEL_UID,
    sharded=True,
    transform=partial(with_kind, api_version=API_VERSION, kind=PLAN_KIND),
    indexes=JOB_INDEXES,
)
# The user's Secrets (and Secrets CAPTF wrote before it labelled them), as metadata:
# `Caches.secret_data` holds the data of the ones objects read.
SECRETS: Final = InformerSpec(
    resource=api.SECRETS,
    labels=f"!{LABEL_MANAGED_BY}",
    metadata_only=True,
    transform=metadata_fields("v1", SECRET),
    indexes=SECRET_INDEXES,
)
# The Secrets CAPTF wrote, with the data decisions read: reading them costs no request.
OWN_SECRETS: Final = InformerSpec(
    resource=api.SECRETS,
    labels=f"{LABEL_MANAGED_BY}={MANAGER}",
    sharded=True,
    transform=own_secret_fields,
    indexes=SECRET_INDEXES,
)
CONFIGMAPS: Final = InformerSpec(
    resource=api.CONFIGMAPS,
    metadata_only=True,
    transform=metadata_fields("v1", CONFIGMAP),
)
# Run slots and operation Leases carry the scope label; the leader Lease does not.
LEASES: Final = InformerSpec(
    resource=api.LEASES,
    labels=LABEL_SCOPE,
    indexes=LEASE_INDEXES,
)
# The run slots and the background budgets alone, watched in the controller's namespace
# when it watches another.
SLOT_LEASES: Final = InformerSpec(
    resource=LEASES.resource,
    labels=f"{LABEL_SCOPE} in ({SCOPE_RUN_SLOT},{SCOPE_BUDGET})",
    indexes=LEASE_INDEXES,
)

# The cluster-scoped identities, whole, with their kind; and the Namespaces, as metadata:
# an identity's allowedNamespaces selector reads their labels. Watched cluster-wide
# whatever --namespace says (both are cluster-scoped).
IDENTITIES: Final = InformerSpec(
    resource=api.IDENTITIES,
    transform=partial(with_kind, api_version=API_VERSION, kind=IDENTITY),
)
# Every TerraformPolicy, whole: the rules a judged Job is given (few, and small).
POLICIES: Final = InformerSpec(
    resource=api.POLICIES,
    transform=partial(with_kind, api_version=API_VERSION, kind=POLICY_KIND),
)
NAMESPACES: Final = InformerSpec(
    resource=api.NAMESPACES,
    metadata_only=True,
    transform=metadata_fields("v1", "Namespace"),
)


# The runner's RBAC (controller/core/decide/runner_rbac.py), as metadata: the
# ServiceAccounts that may run Jobs (the provided captf-runner and opted-in overrides),
# and the RoleBindings the controller provided. Label-selected: a namespace's other
# accounts and bindings cost nothing, and one object of each per namespace is the rule.
RUNNER_ACCOUNTS: Final = InformerSpec(
    resource=api.SERVICE_ACCOUNTS,
    labels=f"{LABEL_RUNNER}=true",
    transform=metadata_fields("v1", "ServiceAccount"),
    indexes=RUNNER_INDEXES,
)
RUNNER_BINDINGS: Final = InformerSpec(
    resource=api.ROLE_BINDINGS,
    labels=f"{LABEL_RUNNER_RBAC}={RUNNER_RBAC_MANAGED}",
    transform=metadata_fields("rbac.authorization.k8s.io/v1", "RoleBinding"),
)


# What says a running Job cannot start (controller/core/jobs/starting.py), watched so a
# Job stuck so wakes its object within seconds. The runner pods while Pending only (the
# field selector): one pod per starting Job, gone from the cache once it runs; and the
# Job controller's FailedCreate Events about Jobs (kept an hour by the API server), none
# while Jobs start normally. Neither is sharded: a pod carries the object's labels, not
# the shard's; the lookups go by the object's uid and the Job's name.
PENDING_PODS: Final = InformerSpec(
    resource=api.PODS,
    labels=LABEL_UID,
    fields="status.phase=Pending",
    transform=pod_fields,
    indexes=POD_INDEXES,
)
FAILED_CREATES: Final = InformerSpec(
    resource=api.EVENTS,
    fields="involvedObject.kind=Job,reason=FailedCreate",
    transform=event_fields,
    indexes=EVENT_INDEXES,
)


def capi_fields(obj: Obj, kind: str) -> Json:
    """A Cluster API object as a pass reads it (the core's `capi_read`: no status but
    `initialization`, no finalizers, deletion or provider IDs), with its kind."""
    return capi_read(with_kind(obj, api_version=CAPI_API_VERSION, kind=kind))


# Cluster API's Clusters, Machines and MachinePools, with their kind (list items lack it,
# and the owner readers ask it), without what a pass does not read. Not sharded: they
# carry no shard label.
CAPI: Final = {
    kind: InformerSpec(
        resource=api.CAPI_OBJECTS[kind],
        transform=partial(capi_fields, kind=kind),
        indexes=CAPI_INDEXES,
    )
    for kind in CAPI_KINDS
}
