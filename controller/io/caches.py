"""The controller's view of the cluster: one informer per resource it reads.

Everything DecideOp sees comes from here, so a decision made from the caches
and one made by `captf decide` from a file differ only in where the objects
came from. What each informer watches, keeps of an object and files it under is
one row of the table in informers.py; `Caches` builds the informers from it and
answers every lookup a pass makes from an index or a key, for what the core's one
read list (controller/core/decide/reads.py) names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType

from controller.core import (
    NO_IDENTITY,
    How,
    IdentityRef,
    IdentityView,
    ObjectRef,
    RunnerFacts,
    Snapshot,
    capi_wanted,
    captf_wanted,
    cluster_name_of,
    configmaps_wanted,
    identity_ref_of,
    is_member,
    owns_secret,
    runner_rbac,
    secret_ref_of,
    secrets_wanted,
    state_parts_wanted,
    terraform_cluster_of,
)
from controller.core.basics.names import (
    API_VERSION,
    CAPI_API_VERSION,
    CAPI_CLUSTER,
    CLUSTER,
    IDENTITY,
    PLAN_KIND,
    RUNNER_ACCOUNT,
    SCOPE_BUDGET,
    SCOPE_RUN_SLOT,
)
from controller.io.contents import Contents, Wanted
from controller.io.indexes import (
    BY_BACKUP_OF,
    BY_CLUSTER,
    BY_INPUTS_OF,
    BY_INVOLVED,
    BY_MIRROR_OF,
    BY_NAMESPACE,
    BY_SCOPE,
    BY_UID,
)
from controller.io.informers import (
    CAPI,
    CONFIGMAPS,
    FAILED_CREATES,
    IDENTITIES,
    JOBS,
    LEASES,
    NAMESPACES,
    OBJECTS,
    OWN_SECRETS,
    PENDING_PODS,
    PLANS,
    POLICIES,
    RUNNER_ACCOUNTS,
    RUNNER_BINDINGS,
    SECRETS,
    SLOT_LEASES,
    TEMPLATES,
    InformerSpec,
    with_kind,
)
from controller.io.jobtimes import ToClock, on_clock, times_on_clock
from runtime.cache import Informer
from runtime.cache.namespaced import Unwatched
from runtime.cache.reflector import ListWatchTransport
from runtime.cache.resource import Obj
from runtime.clock import Clock
from runtime.jsonobj import Json


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
        # those namespaces only): it sees no identity (an object naming one reads
        # IdentityNotFound) and no policy (docs/security.md, "Namespaced install").
        self.identities = informer(IDENTITIES) if cluster_scoped else Unwatched(IDENTITIES.resource)
        self.namespaces = informer(NAMESPACES) if cluster_scoped else Unwatched(NAMESPACES.resource)
        self.policies = informer(POLICIES) if cluster_scoped else Unwatched(POLICIES.resource)
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
            self.policies,
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

    def lease(self, namespace: str, name: str) -> Json | None:
        """The cached copy of one Lease (controller/io/leases.py writes over it first)."""
        for informer in self.lease_caches():
            found = informer.store.get(f"{namespace}/{name}")
            if found is not None:
                return found
        return None

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
        return runner_rbac.facts_of(accounts, [binding] if binding is not None else [])

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

    def reads(self, obj: Json, jobs: Sequence[Json]) -> PassReads:
        """What the pass reads about `obj`, from the core's one list (`capi_wanted`,
        `captf_wanted`, `secrets_wanted`), each related object looked up once."""
        related = self._related(obj)
        ref = identity_ref_of(obj, related)
        return PassReads(related, secrets_wanted(obj, jobs, related), ref)

    async def load_contents(
        self, obj: Json, jobs: Sequence[Json], reads: PassReads | None = None
    ) -> None:
        """Fetches the data `obj`'s decision reads that changed since it was last fetched;
        `jobs`: the object's, from `jobs_of`; `reads`: the pass's, from `reads`."""
        reads = reads or self.reads(obj, jobs)
        ns = obj["metadata"]["namespace"]
        # Values: to render the inputs, and to redact them from the Jobs' messages.
        wanted = [
            Wanted(name, keys_only=how == How.KEYS)
            for name, how in reads.secrets.items()
            if how != How.CACHED
        ]
        await self.secret_data.load(ns, wanted)
        # The identity's Secret, in its own namespace: its key names are checked.
        ref = reads.identity_ref
        identity = self.identity(ref.name) if ref is not None and ref.kind == IDENTITY else None
        if identity is not None:
            source_ns, source = secret_ref_of(identity)
            if source_ns and source:
                await self.secret_data.load(source_ns, [Wanted(source)])
        configmaps = configmaps_wanted(obj)
        if configmaps:
            await self.configmap_data.load(ns, [Wanted(name) for name in configmaps])

    def snapshot(self, obj: Json, jobs: Sequence[Json], reads: PassReads | None = None) -> Snapshot:
        """Everything `decide` reads about `obj`, each part from an index or a key: the
        cost does not grow with the number of objects, Jobs or Secrets around it. `jobs`:
        the object's, from `jobs_of`; `reads`: the pass's, from `reads`."""
        reads = reads or self.reads(obj, jobs)
        meta = obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        kind = str(obj.get("kind", ""))
        # Named by the one list, then found by the object's kind and name: durable inputs,
        # backups; then the parts its state Secrets name (metadata only: a deletion holds
        # when one is missing).
        secret_names = list(reads.secrets)
        secret_names += [
            s["metadata"]["name"]
            for store in (self.own_secrets.store, self.secrets.store)
            for index in (BY_INPUTS_OF, BY_BACKUP_OF)
            for s in store.by_index(index, f"{ns}/{kind}/{name}")
            if owns_secret(obj, s)
        ]
        secret_names += state_parts_wanted(
            obj, reads.secrets, lambda secret: self.secret_data.metadata_of(f"{ns}/{secret}")
        )
        configmaps = self.configmap_data.with_data(ns, configmaps_wanted(obj))
        events, pods = self._starting(obj, jobs)
        return Snapshot(
            obj=obj,
            jobs=tuple(jobs),
            secrets=MappingProxyType(self.secret_data.with_data(ns, secret_names)),
            configmaps=MappingProxyType(configmaps),
            leases=tuple(self._leases(ns)),
            related=MappingProxyType(dict(reads.related)),
            identity=self.identity_view(reads.identity_ref, ns),
            plans=tuple(self.plans_of(meta.get("uid", ""))),
            events=events,
            pods=pods,
            policies=tuple(self.policies.store),
            namespace_labels=MappingProxyType(self.namespace_labels(ns)),
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
        """The run slots, the background budgets, and the Leases of the object's namespace."""
        slots = [
            s
            for inf in self.lease_caches()
            for scope in (SCOPE_RUN_SLOT, SCOPE_BUDGET)
            for s in inf.store.by_index(BY_SCOPE, scope)
        ]
        seen = {id(lease) for lease in slots}
        store = self.leases.store
        local = [lease for lease in store.by_index(BY_NAMESPACE, ns) if id(lease) not in seen]
        return [with_kind(lease, "coordination.k8s.io/v1", "Lease") for lease in [*slots, *local]]

    def _related(self, obj: Json) -> dict[tuple[str, str], Json]:
        """By ObjectRef, what the core's list names (reads.py): the Cluster API owner and
        Cluster; the dependencies and a member's TerraformCluster (through that Cluster);
        and for a TerraformCluster its members (by their Cluster's name)."""
        meta = obj["metadata"]
        ns, uid = meta["namespace"], meta.get("uid")
        related: dict[tuple[str, str], Json] = {}
        for ref in capi_wanted(obj):
            found = self.capi_object(ref.kind, ns, ref.name)
            if found is not None:
                related[ref] = found
        wanted, members_of = captf_wanted(obj, related)
        for kind, name in wanted:
            other = self.object(kind, ns, name) if kind in self.objects else None
            if other is not None and other["metadata"].get("uid") != uid:
                related[ObjectRef(kind, name)] = other
        if members_of:
            for member in self.objects_by(BY_CLUSTER, f"{ns}/{members_of}"):
                if is_member(obj, members_of, member) and member["metadata"].get("uid") != uid:
                    related[ObjectRef(member["kind"], member["metadata"]["name"])] = member
        return related


@dataclass(frozen=True)
class PassReads:
    """What one pass reads, looked up once (`Caches.reads`): the related objects, the
    Secrets by name and how (the core's reads.secrets_wanted), the identity reference."""

    related: Mapping[tuple[str, str], Json]
    secrets: Mapping[str, How]
    identity_ref: IdentityRef | None
