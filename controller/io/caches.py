"""The controller's view of the cluster: one informer per resource it reads.

Everything DecideOp sees comes from here, so a decision made from the caches
and one made by `captf decide` from a file differ only in where the objects
came from. What each informer watches, keeps of an object and files it under is
one row of the table below; `Caches` builds the informers from it and answers
every lookup a pass makes from an index or a key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, Final

from controller.core import (
    CONFIGMAP,
    NO_IDENTITY,
    SECRET,
    IdentityRef,
    IdentityView,
    ObjectRef,
    RunnerFacts,
    Snapshot,
    bootstrap_secret_of,
    capi_cluster_ref,
    cluster_name_of,
    configmaps_read,
    credentials_secret,
    dependencies,
    identity_ref_of,
    infrastructure_cluster_of,
    job_env,
    owner_of,
    result,
    secret_ref_of,
    secrets_read,
    spec_of,
    terraform_cluster_of,
)
from controller.core.basics.names import (
    API_VERSION,
    CAPI_API_VERSION,
    CAPI_CLUSTER,
    CAPI_GROUP,
    CAPI_KINDS,
    CAPI_PLURALS,
    CAPI_VERSION,
    CLUSTER,
    GROUP,
    IDENTITY,
    IDENTITY_PLURAL,
    KINDS,
    LABEL_MANAGED_BY,
    LABEL_RUNNER,
    LABEL_RUNNER_RBAC,
    LABEL_SCOPE,
    LABEL_UID,
    MANAGER,
    PLAN_KIND,
    PLAN_PLURAL,
    PLURALS,
    RUNNER_ACCOUNT,
    RUNNER_RBAC_MANAGED,
    SCOPE_RUN_SLOT,
    TEMPLATE_PLURALS,
    VERSION,
    inputs_secret_prefix,
    state_secret_name,
)
from controller.io.contents import Contents, Wanted
from controller.io.indexes import (
    BY_BACKUP_OF,
    BY_CLUSTER,
    BY_IDENTITY,
    BY_INPUTS_OF,
    BY_INVOLVED,
    BY_MIRROR_OF,
    BY_NAMESPACE,
    BY_SCOPE,
    BY_UID,
    CAPI_INDEXES,
    EVENT_INDEXES,
    JOB_INDEXES,
    LEASE_INDEXES,
    OBJECT_INDEXES,
    POD_INDEXES,
    RUNNER_INDEXES,
    SECRET_INDEXES,
)
from controller.io.jobtimes import ToClock, on_clock, times_on_clock
from controller.io.trimming import (
    Transform,
    event_fields,
    job_fields,
    metadata_fields,
    own_secret_fields,
    pod_fields,
)
from runtime.cache import IndexFunc, Informer, Resource, Selection
from runtime.cache.namespaced import Namespaced, Unwatched
from runtime.cache.reflector import ListWatchTransport
from runtime.cache.resource import Obj
from runtime.clock import Clock

Json = dict[str, Any]


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
        resource=Resource(GROUP, VERSION, PLURALS[kind]),
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
        resource=Resource(GROUP, VERSION, plural),
        transform=partial(with_kind, api_version=API_VERSION, kind=kind),
    )
    for kind, plural in TEMPLATE_PLURALS.items()
}
# Only CAPTF's Jobs: they all carry the uid label.
JOBS: Final = InformerSpec(
    resource=Resource("batch", "v1", "jobs"),
    labels=LABEL_UID,
    sharded=True,
    transform=job_fields,
    indexes=JOB_INDEXES,
)
# The TerraformPlans, by their object's uid label; sharded like the Jobs.
PLANS: Final = InformerSpec(
    resource=Resource(GROUP, VERSION, PLAN_PLURAL),
    labels=LABEL_UID,
    sharded=True,
    transform=partial(with_kind, api_version=API_VERSION, kind=PLAN_KIND),
    indexes=JOB_INDEXES,
)
# The user's Secrets (and Secrets CAPTF wrote before it labelled them), as metadata:
# `Caches.secret_data` holds the data of the ones objects read.
SECRETS: Final = InformerSpec(
    resource=Resource("", "v1", "secrets"),
    labels=f"!{LABEL_MANAGED_BY}",
    metadata_only=True,
    transform=metadata_fields("v1", SECRET),
    indexes=SECRET_INDEXES,
)
# The Secrets CAPTF wrote, with the data decisions read: reading them costs no request.
OWN_SECRETS: Final = InformerSpec(
    resource=Resource("", "v1", "secrets"),
    labels=f"{LABEL_MANAGED_BY}={MANAGER}",
    sharded=True,
    transform=own_secret_fields,
    indexes=SECRET_INDEXES,
)
CONFIGMAPS: Final = InformerSpec(
    resource=Resource("", "v1", "configmaps"),
    metadata_only=True,
    transform=metadata_fields("v1", CONFIGMAP),
)
# Run slots and operation Leases carry the scope label; the leader Lease does not.
LEASES: Final = InformerSpec(
    resource=Resource("coordination.k8s.io", "v1", "leases"),
    labels=LABEL_SCOPE,
    indexes=LEASE_INDEXES,
)
# The run slots alone, watched in the controller's namespace when it watches another.
SLOT_LEASES: Final = InformerSpec(
    resource=LEASES.resource,
    labels=f"{LABEL_SCOPE}={SCOPE_RUN_SLOT}",
    indexes=LEASE_INDEXES,
)

# The cluster-scoped identities, whole, with their kind; and the Namespaces, as metadata:
# an identity's allowedNamespaces selector reads their labels. Watched cluster-wide
# whatever --namespace says (both are cluster-scoped).
IDENTITIES: Final = InformerSpec(
    resource=Resource(GROUP, VERSION, IDENTITY_PLURAL, namespaced=False),
    transform=partial(with_kind, api_version=API_VERSION, kind=IDENTITY),
)
NAMESPACES: Final = InformerSpec(
    resource=Resource("", "v1", "namespaces", namespaced=False),
    metadata_only=True,
    transform=metadata_fields("v1", "Namespace"),
)


# The runner's RBAC (controller/core/decide/runner_rbac.py), as metadata: the
# ServiceAccounts that may run Jobs (the provided captf-runner and opted-in overrides),
# and the RoleBindings the controller provided. Label-selected: a namespace's other
# accounts and bindings cost nothing, and one object of each per namespace is the rule.
RUNNER_ACCOUNTS: Final = InformerSpec(
    resource=Resource("", "v1", "serviceaccounts"),
    labels=f"{LABEL_RUNNER}=true",
    transform=metadata_fields("v1", "ServiceAccount"),
    indexes=RUNNER_INDEXES,
)
RUNNER_BINDINGS: Final = InformerSpec(
    resource=Resource("rbac.authorization.k8s.io", "v1", "rolebindings"),
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
    resource=Resource("", "v1", "pods"),
    labels=LABEL_UID,
    fields="status.phase=Pending",
    transform=pod_fields,
    indexes=POD_INDEXES,
)
FAILED_CREATES: Final = InformerSpec(
    resource=Resource("", "v1", "events"),
    fields="involvedObject.kind=Job,reason=FailedCreate",
    transform=event_fields,
    indexes=EVENT_INDEXES,
)


# Cluster API's Clusters, Machines and MachinePools, whole, with their kind (list items
# lack it, and the owner readers ask it). Not sharded: they carry no shard label.
CAPI: Final = {
    kind: InformerSpec(
        resource=Resource(CAPI_GROUP, CAPI_VERSION, CAPI_PLURALS[kind]),
        transform=partial(with_kind, api_version=CAPI_API_VERSION, kind=kind),
        indexes=CAPI_INDEXES,
    )
    for kind in CAPI_KINDS
}


class Caches:
    """One informer per row of the table, and every lookup a snapshot needs as an index.

    `label_selector` (sharding) narrows the sharded rows to one shard. The Secrets CAPTF
    wrote are cached with the data decisions read; the user's Secrets and ConfigMaps are
    cached as metadata, and `secret_data` and `configmap_data` hold the data of the ones
    objects read, fetched again when their version moves."""

    def __init__(
        self,
        transport: ListWatchTransport,
        *,
        clock: Clock,
        namespace: str | tuple[str, ...] | None,
        label_selector: str | None = None,
        job_clock: ToClock | None = None,
        slot_namespace: str | None = None,
        cluster_scoped: bool = True,
    ) -> None:
        """`namespace`: the one watched, or several (an informer per namespace each), or
        None for all. `job_clock`: moves the Jobs' wall-clock times onto a scaled decision
        clock (`jobtimes`); None at scale 1. `slot_namespace`: the controller's namespace,
        where the run slots live; watched for them when it is not among those watched.
        `cluster_scoped`: whether identities and Namespaces (cluster-scoped) are watched."""
        self._job_clock = job_clock
        watched = (namespace,) if isinstance(namespace, str) else namespace
        informer = partial(
            InformerSpec.cache,
            transport=transport,
            clock=clock,
            namespaces=watched,
            shard=label_selector,
        )
        self.objects = {kind: informer(spec) for kind, spec in OBJECTS.items()}
        self.capi = {kind: informer(spec) for kind, spec in CAPI.items()}
        self.templates = {kind: informer(spec) for kind, spec in TEMPLATES.items()}
        self.jobs = informer(JOBS)
        self.plans = informer(PLANS)
        self.secrets = informer(SECRETS)
        self.own_secrets = informer(OWN_SECRETS)
        self.configmaps = informer(CONFIGMAPS)
        self.leases = informer(LEASES)
        # A controller given --namespaces may list nothing cluster-wide (its Roles are in
        # those namespaces only): it sees no identity, and an object naming one reads
        # IdentityNotFound (docs/security.md, "Namespaced install").
        self.identities = informer(IDENTITIES) if cluster_scoped else Unwatched(IDENTITIES.resource)
        self.namespaces = informer(NAMESPACES) if cluster_scoped else Unwatched(NAMESPACES.resource)
        self.runner_accounts = informer(RUNNER_ACCOUNTS)
        self.runner_bindings = informer(RUNNER_BINDINGS)
        self.pending_pods = informer(PENDING_PODS)
        self.failed_creates = informer(FAILED_CREATES)
        # Restricted to one namespace, the controller still frees and counts the run slots
        # of its own: without them every object waits for a slot once all are taken.
        apart = watched is not None and slot_namespace not in (None, *watched)
        slots = (slot_namespace,) if slot_namespace is not None else None
        self.slot_leases = informer(SLOT_LEASES, namespaces=slots) if apart else None
        self.secret_data = Contents(
            transport, SECRETS.resource, self.secrets.store, whole=self.own_secrets.store
        )
        self.configmap_data = Contents(transport, CONFIGMAPS.resource, self.configmaps.store)

    def informers(self) -> list[Informer]:
        return [
            *self.objects.values(),
            *self.capi.values(),
            *self.templates.values(),
            self.jobs,
            self.plans,
            self.secrets,
            self.own_secrets,
            self.configmaps,
            self.identities,
            self.namespaces,
            self.runner_accounts,
            self.runner_bindings,
            self.pending_pods,
            self.failed_creates,
            *self.lease_caches(),
        ]

    def lease_caches(self) -> list[Informer]:
        """The Leases' informers: the watched namespaces', and the run slots' own when the
        controller's namespace is not among them."""
        return [self.leases] if self.slot_leases is None else [self.leases, self.slot_leases]

    def all_leases(self) -> list[Json]:
        """Every cached run slot and operation Lease (as stored)."""
        return [lease for inf in self.lease_caches() for lease in inf.store]

    def by_kind(self) -> dict[str, list[Json]]:
        """Every cached CAPTF object, by kind (as stored, with apiVersion and kind)."""
        return {kind: list(inf.store) for kind, inf in self.objects.items()}

    def object(self, kind: str, namespace: str, name: str) -> Json | None:
        found = self.objects[kind].store.get(f"{namespace}/{name}")
        return None if found is None else with_kind(found, API_VERSION, kind)

    def template(self, kind: str, namespace: str, name: str) -> Json | None:
        found = self.templates[kind].store.get(f"{namespace}/{name}")
        return None if found is None else with_kind(found, API_VERSION, kind)

    def objects_by(self, index: str, value: str) -> list[Json]:
        return [
            with_kind(o, API_VERSION, kind)
            for kind, inf in self.objects.items()
            for o in inf.store.by_index(index, value)
        ]

    def runner_facts(self, namespace: str) -> RunnerFacts:
        """The namespace's runner RBAC as cached: what its decisions read."""
        accounts = self.runner_accounts.store.by_index(BY_NAMESPACE, namespace)
        binding = self.runner_bindings.store.get(f"{namespace}/{RUNNER_ACCOUNT}")
        return RunnerFacts(
            accounts=MappingProxyType(
                {a["metadata"]["name"]: a["metadata"].get("labels") or {} for a in accounts}
            ),
            binding=binding is not None,
        )

    def objects_in(self, namespace: str) -> int:
        """How many CAPTF objects of the namespace are cached."""
        return sum(
            len(inf.store.by_index(BY_NAMESPACE, namespace)) for inf in self.objects.values()
        )

    def capi_object(self, kind: str, namespace: str, name: str) -> Json | None:
        """A cached Cluster, Machine or MachinePool (with its kind)."""
        found = self.capi[kind].store.get(f"{namespace}/{name}") if name else None
        return None if found is None else with_kind(found, CAPI_API_VERSION, kind)

    def capi_by(self, index: str, value: str) -> list[Json]:
        return [o for inf in self.capi.values() for o in inf.store.by_index(index, value)]

    def owner(self, obj: Json) -> Json | None:
        """The Cluster API object a CAPTF object acts for, when cached."""
        ref = owner_of(obj)
        ns = obj["metadata"]["namespace"]
        return self.capi_object(ref.kind, ns, ref.name) if ref is not None else None

    def terraform_cluster(self, obj: Json) -> Json | None:
        """A member's TerraformCluster, through its Cluster's infrastructureRef."""
        ns = obj["metadata"]["namespace"]
        cluster = self.capi_object(CAPI_CLUSTER, ns, cluster_name_of(obj))
        name = terraform_cluster_of(cluster)
        return self.object(CLUSTER, ns, name) if name else None

    def identity(self, name: str) -> Json | None:
        """A TerraformClusterIdentity, as cached (with its kind)."""
        found = self.identities.store.get(name) if name else None
        return None if found is None else with_kind(found, API_VERSION, IDENTITY)

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        found = self.namespaces.store.get(namespace) or {}
        return dict((found.get("metadata") or {}).get("labels") or {})

    def identity_users(self, name: str, namespace: str | None = None) -> list[Json]:
        """The objects that run with identity `name` (in `namespace`, or anywhere): those
        naming it, and the machines and pools of such a TerraformCluster that name none."""
        direct = self.objects_by(BY_IDENTITY, name)
        if namespace is not None:
            direct = [o for o in direct if o["metadata"]["namespace"] == namespace]
        found = list(direct)
        for cluster in (o for o in direct if o["kind"] == CLUSTER):
            ns = cluster["metadata"]["namespace"]
            for member in self.objects_by(BY_CLUSTER, f"{ns}/{cluster_name_of(cluster)}"):
                ref = identity_ref_of(member, {})
                if member["kind"] != CLUSTER and ref is None:
                    found.append(member)
        return found

    def mirrors_of(self, name: str) -> dict[str, Json]:
        """The mirrors of identity `name`, by namespace (as cached, metadata only)."""
        return {
            s["metadata"]["namespace"]: s for s in self.secrets.store.by_index(BY_MIRROR_OF, name)
        }

    def identity_view(self, ref: IdentityRef | None, namespace: str) -> IdentityView:
        """What an object's decision reads of its identity: the identity, its Secret's key
        names (the data `load_contents` loaded), the namespace's labels."""
        if ref is None or ref.kind != IDENTITY:
            return NO_IDENTITY
        identity = self.identity(ref.name)
        if identity is None:
            return IdentityView(namespace_labels=MappingProxyType(self.namespace_labels(namespace)))
        ns, name = secret_ref_of(identity)
        meta = self.secret_data.metadata_of(f"{ns}/{name}") if name else None
        data = self.secret_data.data(ns, name) if meta is not None else None
        keys = None if meta is None else frozenset(data or {})
        labels = MappingProxyType(self.namespace_labels(namespace))
        return IdentityView(identity, keys, labels)

    def jobs_of(self, uid: str) -> list[Json]:
        """An object's Jobs, as its decision reads them. Taken once per pass and handed to
        `load_contents` and `snapshot`: on a scaled clock each call copies every Job."""
        return [self._job_view(j) for j in self.jobs.store.by_index(BY_UID, uid)]

    def job(self, namespace: str, name: str) -> Json | None:
        found = self.jobs.store.get(f"{namespace}/{name}")
        return None if found is None else self._job_view(found)

    def _job_view(self, job: Obj) -> Json:
        typed = with_kind(job, "batch/v1", "Job")
        return typed if self._job_clock is None else on_clock(typed, self._job_clock)

    async def load_contents(self, obj: Json, jobs: Sequence[Json]) -> None:
        """Fetches the data `obj`'s decision reads that changed since it was last fetched;
        `jobs`: the object's, from `jobs_of`."""
        ns, spec = obj["metadata"]["namespace"], spec_of(obj)
        # Values: to render the inputs, and to redact them from the Jobs' messages.
        carried = {name for job in jobs for name in job_env(job).carried_secrets}
        read = {*secrets_read(spec), *carried, *self._bootstrap(obj)}
        wanted = [Wanted(name) for name in read]
        wanted += [Wanted(name, keys_only=True) for name in _plan_secrets(jobs)]
        await self.secret_data.load(ns, wanted)
        # The identity's Secret, in its own namespace: its key names are checked.
        ref = identity_ref_of(obj, self._related(obj))
        identity = self.identity(ref.name) if ref is not None and ref.kind == IDENTITY else None
        if identity is not None:
            source_ns, source = secret_ref_of(identity)
            if source_ns and source:
                await self.secret_data.load(source_ns, [Wanted(source)])
        configmaps = configmaps_read(spec)
        if configmaps:
            await self.configmap_data.load(ns, [Wanted(name) for name in configmaps])

    def snapshot(self, obj: Json, jobs: Sequence[Json]) -> Snapshot:
        """Everything `decide` reads about `obj`, each part from an index or a key: the
        cost does not grow with the number of objects, Jobs or Secrets around it. `jobs`:
        the object's, from `jobs_of`."""
        meta, spec = obj["metadata"], spec_of(obj)
        ns, name = meta["namespace"], meta["name"]
        secret_names = [state_secret_name(name), *secrets_read(spec), *_plan_secrets(jobs)]
        secret_names += [secret for job in jobs for secret in job_env(job).carried_secrets]
        secret_names += self._bootstrap(obj)
        prefix = inputs_secret_prefix(name)
        secret_names += [
            s["metadata"]["name"]
            for store in (self.own_secrets.store, self.secrets.store)
            for s in store.by_index(BY_INPUTS_OF, f"{ns}/{name}")
            if s["metadata"]["name"].startswith(prefix)
        ]
        related = self._related(obj)
        ref = identity_ref_of(obj, related)
        secret_names += [credentials_secret(ref)] if ref is not None else []
        secret_names += _cluster_state(obj, related)  # a member's inputs: the cluster's exports
        # The state's backups: a held deletion names the newest, Retain labels them all.
        secret_names += [
            s["metadata"]["name"]
            for store in (self.own_secrets.store, self.secrets.store)
            for s in store.by_index(BY_BACKUP_OF, f"{ns}/{name}")
        ]
        configmaps = _with_data(self.configmap_data, ns, configmaps_read(spec))
        events, pods = self._starting(obj, jobs)
        return Snapshot(
            obj=obj,
            jobs=tuple(jobs),
            secrets=MappingProxyType(_with_data(self.secret_data, ns, secret_names)),
            configmaps=MappingProxyType(configmaps),
            leases=tuple(self._leases(ns)),
            related=MappingProxyType(related),
            identity=self.identity_view(ref, ns),
            plans=tuple(self.plans_of(meta.get("uid", ""))),
            events=events,
            pods=pods,
        )

    def _starting(
        self, obj: Json, jobs: Sequence[Json]
    ) -> tuple[tuple[Json, ...], tuple[Json, ...]]:
        """The FailedCreate Events about the object's Jobs and its Pending runner pods,
        their times on the decision clock."""
        ns = obj["metadata"]["namespace"]
        events = [
            e
            for job in jobs
            for e in self.failed_creates.store.by_index(
                BY_INVOLVED, f"{ns}/{job['metadata']['name']}"
            )
        ]
        pods = list(self.pending_pods.store.by_index(BY_UID, str(obj["metadata"].get("uid", ""))))
        if self._job_clock is not None:
            events = [times_on_clock(e, self._job_clock) for e in events]
            pods = [times_on_clock(p, self._job_clock) for p in pods]
        return tuple(events), tuple(pods)

    def plans_of(self, uid: str) -> list[Json]:
        """An object's TerraformPlans (with their kind)."""
        found = self.plans.store.by_index(BY_UID, uid) if uid else []
        return [with_kind(p, API_VERSION, PLAN_KIND) for p in found]

    def _leases(self, ns: str) -> list[Json]:
        slots = [
            s for inf in self.lease_caches() for s in inf.store.by_index(BY_SCOPE, SCOPE_RUN_SLOT)
        ]
        seen = {id(lease) for lease in slots}
        store = self.leases.store
        local = [lease for lease in store.by_index(BY_NAMESPACE, ns) if id(lease) not in seen]
        return [with_kind(lease, "coordination.k8s.io/v1", "Lease") for lease in [*slots, *local]]

    def _bootstrap(self, obj: Json) -> list[str]:
        """The bootstrap data Secret of a member's owner: a user Secret, read like the others."""
        name = bootstrap_secret_of(self.owner(obj)) if obj.get("kind") != CLUSTER else ""
        return [name] if name else []

    def _related(self, obj: Json) -> dict[tuple[str, str], Json]:
        """By ObjectRef: the Cluster API owner and Cluster; a member's TerraformCluster
        (through that Cluster); the dependencies; and for a TerraformCluster its members
        (by their Cluster's name)."""
        meta = obj["metadata"]
        ns, uid = meta["namespace"], meta.get("uid")
        related: dict[tuple[str, str], Json] = {}
        for ref in (owner_of(obj), capi_cluster_ref(obj)):
            found = self.capi_object(ref.kind, ns, ref.name) if ref is not None else None
            if ref is not None and found is not None:
                related[ref] = found
        wanted = list(dependencies(spec_of(obj)))
        if obj.get("kind") != CLUSTER:
            ref = capi_cluster_ref(obj)
            cluster = related.get(ref) if ref is not None else None
            wanted.append(ObjectRef(CLUSTER, terraform_cluster_of(cluster)))
        for kind, name in wanted:
            other = self.object(kind, ns, name) if kind in self.objects and name else None
            if other is not None and other["metadata"].get("uid") != uid:
                related[ObjectRef(kind, name)] = other
        capi_name = cluster_name_of(obj)
        if obj.get("kind") == CLUSTER and capi_name:
            for member in self.objects_by(BY_CLUSTER, f"{ns}/{capi_name}"):
                if member["kind"] != CLUSTER and member["metadata"].get("uid") != uid:
                    related[ObjectRef(member["kind"], member["metadata"]["name"])] = member
        return related


def _cluster_state(obj: Json, related: Mapping[Any, Json]) -> list[str]:
    """A member's TerraformCluster's state Secret (its outputs.json holds the exports the
    member's module receives): the one its Cluster names as infrastructure."""
    if obj.get("kind") == CLUSTER:
        return []
    clusters = (
        infrastructure_cluster_of(o) for o in related.values() if o.get("kind") == "Cluster"
    )
    return [state_secret_name(name) for name in clusters if name]


def _plan_secrets(jobs: Iterable[Json]) -> list[str]:
    """The plan Secrets the Jobs' results name: a decision asks only whether they have keys."""
    names = (str((result(job) or {}).get("planSecret") or "") for job in jobs)
    return [name for name in names if name]


def _with_data(contents: Contents, ns: str, names: Iterable[str]) -> dict[str, Json]:
    """The named Secrets or ConfigMaps that exist, each with the data held for it."""
    found: dict[str, Json] = {}
    for name in names:
        meta = contents.metadata_of(f"{ns}/{name}")
        if meta is None:
            continue
        data = contents.data(ns, name)
        found[name] = meta if data is None else meta | {"data": data}
    return found
