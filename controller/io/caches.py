"""The controller's view of the cluster: one informer per resource it reads.

Everything DecideOp sees comes from here, so a decision made from the caches
and one made by `captf decide` from a file differ only in where the objects
came from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Any

from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_INPUTS_HASH,
    API_VERSION,
    CLUSTER,
    FINALIZER,
    GROUP,
    KINDS,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_OUTPUTS_OF,
    LABEL_PLAN_OF,
    LABEL_RETRY_CAPPED,
    LABEL_SCOPE,
    LABEL_UID,
    LEASE_WAITS,
    MANAGER,
    PLURALS,
    SCOPE_RUN_SLOT,
    VERSION,
    inputs_secret_prefix,
    state_secret_name,
)
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import result
from controller.core.leases.family import holder_of, member_jobs
from controller.core.spec.ready import ready_of
from controller.io.contents import Contents, Reader, Wanted
from controller.io.jobtimes import ToClock, on_clock
from runtime.cache import Informer, Resource, Selection, interned, label_index
from runtime.cache.reflector import ListWatchTransport
from runtime.cache.resource import Obj
from runtime.clock import Clock

Json = dict[str, Any]
BY_NAMESPACE = "namespace"
BY_UID = "uid"
BY_SCOPE = "scope"
# Objects by what they point at, "namespace/..." each: the reverse lookups a change needs.
BY_REF = "ref"  # "ns/Secret/name", "ns/ConfigMap/name": referenced or owned
BY_CLUSTER = "cluster"  # "ns/cluster": a pool or machine, by its clusterRef
BY_DEPENDENCY = "dependency"  # "ns/Kind/name": an object, by each of its dependsOn
BY_WAITING = "waiting"  # "lease": objects whose status says they wait for a Lease
BY_INPUTS_OF = "inputs_of"  # "ns/name": a durable inputs Secret, by its object's name
WAITING_FOR_LEASE = "lease"
INPUTS_INFIX = "-inputs-"

SECRET = "Secret"
CONFIGMAP = "ConfigMap"


def _namespace_index(obj: Obj) -> Iterable[str]:
    ns = obj.get("metadata", {}).get("namespace")
    return [ns] if ns else []


def _spec(obj: Obj) -> Json:
    return obj.get("spec") or {}


def _ref_name(value: object) -> str:
    return str((value if isinstance(value, dict) else {}).get("name") or "")


def referenced_secrets(obj: Obj) -> list[str]:
    """The user's Secrets an object's spec names: credentials, then variablesFrom."""
    spec = _spec(obj)
    names = [_ref_name(spec.get("credentialsRef"))]
    names += [_ref_name(entry.get("secretRef")) for entry in spec.get("variablesFrom") or []]
    return [name for name in names if name]


def module_configmap(obj: Obj) -> str:
    return _ref_name((_spec(obj).get("module") or {}).get("configMapRef"))


def referenced_configmaps(obj: Obj) -> list[str]:
    """The ConfigMaps an object's spec names: the module, then variablesFrom."""
    spec = _spec(obj)
    names = [module_configmap(obj)]
    names += [_ref_name(entry.get("configMapRef")) for entry in spec.get("variablesFrom") or []]
    return list(dict.fromkeys(name for name in names if name))


def _ref_index(obj: Obj) -> Iterable[str]:
    meta = obj["metadata"]
    ns = meta.get("namespace", "")
    secrets = [*referenced_secrets(obj), state_secret_name(meta["name"])]
    refs = [f"{ns}/{SECRET}/{name}" for name in secrets]
    return refs + [f"{ns}/{CONFIGMAP}/{name}" for name in referenced_configmaps(obj)]


def _cluster_index(obj: Obj) -> Iterable[str]:
    cluster = _ref_name(_spec(obj).get("clusterRef"))
    return [f"{obj['metadata'].get('namespace', '')}/{cluster}"] if cluster else []


def _dependency_index(obj: Obj) -> Iterable[str]:
    ns = obj["metadata"].get("namespace", "")
    deps = _spec(obj).get("dependsOn") or []
    return [f"{ns}/{dep.get('kind', '')}/{dep.get('name', '')}" for dep in deps]


def _waiting_index(obj: Obj) -> Iterable[str]:
    reason = str(((obj.get("status") or {}).get("next") or {}).get("reason") or "")
    return [WAITING_FOR_LEASE] if reason in LEASE_WAITS else []


def _inputs_of_index(secret: Obj) -> Iterable[str]:
    meta = secret["metadata"]
    name = str(meta.get("name", ""))
    if INPUTS_INFIX not in name:
        return []
    return [f"{meta.get('namespace', '')}/{name.rsplit(INPUTS_INFIX, 1)[0]}"]


# What the controller reads of a Job (controller/core/jobs/job.py, history.py, sensitive.py,
# io/accountant.py, io/interrupted.py, io/janitor.py): its identity, its labels (but
# the four the Job controller adds, which name the Job itself) and annotations, owners,
# its status's times and counts, and of its conditions the terminal ones (Complete,
# Failed); of its pod template, only three of the runner's variables (the inputs hash,
# and only when the annotation does not record it; the inputs Secret and the secret
# variables a message is redacted with) and the Secrets it takes its environment from.
# The rest of the template, by far the largest part, is dropped as the Job is decoded.
# Strings that many Jobs repeat are interned and equal times within one Job shared
# (a finished Job's completionTime is its terminal condition's time): with the store's
# interning this brings a cached Job under 4 KiB (captf bench scale: bytes_per_cached_job).
JOB_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)
JOB_CONTROLLER_LABELS = frozenset(
    {
        "batch.kubernetes.io/controller-uid",
        "batch.kubernetes.io/job-name",
        "controller-uid",
        "job-name",
    }
)
# Of an owner reference, what finds the owner (blockOwnerDeletion is the garbage
# collector's alone).
OWNER_REFERENCE = ("apiVersion", "kind", "name", "uid", "controller")
INPUTS_SECRET_ENV = "CAPTF_INPUTS_SECRET"
INPUTS_HASH_ENV = "CAPTF_INPUTS_HASH"
RUNNER_ENV_READ = frozenset({INPUTS_HASH_ENV, INPUTS_SECRET_ENV, "CAPTF_SECRET_VARIABLES"})
TERMINAL_CONDITIONS = frozenset({"Complete", "Failed"})


def job_fields(job: Obj) -> Obj:
    """A Job as cached: only the fields listed above."""
    meta = job.get("metadata") or {}
    kept_meta = {k: meta[k] for k in JOB_METADATA if k in meta}
    owners = kept_meta.get("ownerReferences")
    if owners:
        kept_meta["ownerReferences"] = [
            {k: ref[k] for k in OWNER_REFERENCE if k in ref}
            for ref in owners
            if isinstance(ref, dict)
        ]
    labels = kept_meta.get("labels")
    if labels:
        kept_meta["labels"] = {k: v for k, v in labels.items() if k not in JOB_CONTROLLER_LABELS}
    kept: Obj = {
        "apiVersion": interned(job.get("apiVersion", "batch/v1")),
        "kind": interned(job.get("kind", "Job")),
        "metadata": kept_meta,
    }
    if "status" in job:
        kept["status"] = _job_status(job["status"])
    recorded = bool((kept_meta.get("annotations") or {}).get(ANN_INPUTS_HASH))
    containers = _runner_env(
        job, RUNNER_ENV_READ - {INPUTS_HASH_ENV} if recorded else RUNNER_ENV_READ
    )
    if containers:
        kept["spec"] = {"template": {"spec": {"containers": containers}}}
    return kept


JOB_STATUS = ("startTime", "completionTime", "active", "succeeded", "failed")
JOB_CONDITION_WORDS = ("type", "status", "reason")


def _job_status(status: Json) -> Json:
    """Times, counts and the terminal conditions (without their messages, which nothing
    reads)."""
    kept = {k: status[k] for k in JOB_STATUS if k in status}
    conditions = [
        _condition(c, kept.get("completionTime"))
        for c in status.get("conditions") or []
        if isinstance(c, dict) and c.get("type") in TERMINAL_CONDITIONS
    ]
    if conditions:
        kept["conditions"] = conditions
    return kept


def _condition(cond: Json, completed: object) -> Json:
    """Its words interned; its time, when it equals completionTime, the same string."""
    kept = {k: interned(cond[k]) for k in JOB_CONDITION_WORDS if k in cond}
    if "lastTransitionTime" in cond:
        when = cond["lastTransitionTime"]
        kept["lastTransitionTime"] = completed if when == completed else when
    return kept


def _containers(job: Obj) -> list[Json]:
    pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    found: list[Json] = pod.get("containers") or []
    return found


def _runner_env(job: Obj, read: frozenset[str]) -> list[Json]:
    kept: list[Json] = []
    for container in _containers(job):
        env = [
            {"name": interned(e["name"]), "value": interned(e["value"])}
            for e in container.get("env") or []
            if e.get("name") in read and "value" in e
        ]
        sources = [
            {"secretRef": {"name": interned(s["secretRef"]["name"])}}
            for s in container.get("envFrom") or []
            if (s.get("secretRef") or {}).get("name")
        ]
        if env or sources:
            kept.append({"env": env, "envFrom": sources})
    return kept


def job_secrets(job: Obj) -> list[str]:
    """The Secrets whose values a Job carried: its inputs Secret and its envFrom Secrets."""
    names: list[str] = []
    for container in _containers(job):
        for e in container.get("env") or []:
            if e.get("name") == INPUTS_SECRET_ENV and e.get("value"):
                names.append(str(e["value"]))
        for source in container.get("envFrom") or []:
            name = (source.get("secretRef") or {}).get("name")
            if name:
                names.append(str(name))
    return names


# What the controller reads of a Secret's or a ConfigMap's metadata: its identity, its
# version (data is fetched again when it moves), labels (whose is it) and annotations
# (a state's serial and inputs hash, an inputs Secret's interrupted-apply record).
DATA_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations")


def _as(api_version: str, kind: str) -> Callable[[Obj], Obj]:
    """PartialObjectMetadata as cached: the metadata read, under its real kind."""

    def transform(obj: Obj) -> Obj:
        meta = obj["metadata"]
        kept = {k: meta[k] for k in DATA_METADATA if k in meta}
        return {"apiVersion": api_version, "kind": kind, "metadata": kept}

    return transform


def own_secret_fields(secret: Obj) -> Obj:
    """A Secret CAPTF wrote, as cached: the metadata read and the data decisions read.

    A durable inputs Secret keeps its values (the inputs, and what a Job's messages are
    redacted with), an outputs Secret too (other objects take variables from it); a
    plan Secret keeps its keys (a decision asks only whether it has any; the plan itself
    can be near a megabyte); a state, its backups and rescues keep none (decisions read
    their annotations; their data is fetched if an object reads it after all)."""
    kept = _as("v1", SECRET)(secret)
    name = str(kept["metadata"].get("name", ""))
    labels = kept["metadata"].get("labels") or {}
    data = secret.get("data") or {}
    if LABEL_PLAN_OF in labels:
        kept["data"] = dict.fromkeys(data, "")
    elif LABEL_OUTPUTS_OF in labels or (INPUTS_INFIX in name and LABEL_BACKUP_OF not in labels):
        kept["data"] = data
    return kept


def with_kind(obj: Obj, api_version: str, kind: str) -> Json:
    """List items come without apiVersion and kind; decisions and owner references need them."""
    if obj.get("kind") == kind and obj.get("apiVersion"):
        return obj
    return {"apiVersion": api_version, "kind": kind} | obj


def key_of(kind: str, namespace: str, name: str) -> str:
    """A work-queue key: `Kind/namespace/name` (three kinds share one queue)."""
    return f"{kind}/{namespace}/{name}"


def parse_key(key: str) -> tuple[str, str, str]:
    kind, namespace, name = key.split("/", 2)
    return kind, namespace, name


class Caches:
    """One informer per resource read, and every lookup a snapshot needs as an index.

    `label_selector` (sharding) narrows the CAPTF objects to one shard, and with them
    the Jobs and the Secrets CAPTF wrote, which carry their object's labels of the
    selector's keys (controller/core/spec/sharding.py). The user's Secrets and ConfigMaps do
    not carry them and are not narrowed.
    The Secrets CAPTF wrote (labelled captf.io/managed-by) are cached with the data
    decisions read, so reading them costs no request; the user's Secrets and ConfigMaps
    (and Secrets written before the label) are cached as metadata, and `contents` holds
    the data of the ones objects read, fetched again when their version moves."""

    def __init__(
        self,
        transport: ListWatchTransport,
        *,
        clock: Clock,
        namespace: str | None,
        reader: Reader | None = None,
        label_selector: str | None = None,
        job_clock: ToClock | None = None,
        slot_namespace: str | None = None,
    ) -> None:
        """`job_clock`: moves the Jobs' wall-clock times onto a scaled decision clock
        (`jobtimes`); None at scale 1. `slot_namespace`: the controller's namespace,
        where the run slots live; watched for them when `namespace` is another."""
        self._job_clock = job_clock

        def informer(
            group: str,
            version: str,
            plural: str,
            *,
            labels: str | None = None,
            metadata_only: bool = False,
            transform: Callable[[Obj], Obj] | None = None,
            within: str | None = namespace,
            **indexers: Any,
        ) -> Informer:
            selection = Selection(
                namespace=within, label_selector=labels, metadata_only=metadata_only
            )
            resource = Resource(group, version, plural)
            return Informer(
                transport,
                resource,
                clock=clock,
                selection=selection,
                indexers=indexers,
                transform=transform,
            )

        self.objects = {
            kind: informer(
                GROUP,
                VERSION,
                PLURALS[kind],
                labels=label_selector,
                namespace=_namespace_index,
                ref=_ref_index,
                cluster=_cluster_index,
                dependency=_dependency_index,
                waiting=_waiting_index,
            )
            for kind in KINDS
        }

        def narrowed(labels: str) -> str:
            return labels if not label_selector else f"{labels},{label_selector}"

        # Only CAPTF's Jobs: they all carry the uid label.
        self.jobs = informer(
            "batch",
            "v1",
            "jobs",
            labels=narrowed(LABEL_UID),
            transform=job_fields,
            uid=label_index(LABEL_UID),
        )
        self.secrets = informer(
            "",
            "v1",
            "secrets",
            labels=f"!{LABEL_MANAGED_BY}",
            metadata_only=True,
            transform=_as("v1", SECRET),
            inputs_of=_inputs_of_index,
        )
        self.own_secrets = informer(
            "",
            "v1",
            "secrets",
            labels=narrowed(f"{LABEL_MANAGED_BY}={MANAGER}"),
            transform=own_secret_fields,
            inputs_of=_inputs_of_index,
        )
        self.configmaps = informer(
            "", "v1", "configmaps", metadata_only=True, transform=_as("v1", CONFIGMAP)
        )
        # Run slots and operation Leases carry the scope label; the leader Lease does not.
        self.leases = informer(
            "coordination.k8s.io",
            "v1",
            "leases",
            labels=LABEL_SCOPE,
            namespace=_namespace_index,
            scope=label_index(LABEL_SCOPE),
        )
        # Restricted to one namespace, the controller still frees and counts the run slots
        # of its own: without them every object waits for a slot once all are taken.
        self.slot_leases: Informer | None = None
        if namespace is not None and slot_namespace not in (None, namespace):
            self.slot_leases = informer(
                "coordination.k8s.io",
                "v1",
                "leases",
                labels=f"{LABEL_SCOPE}={SCOPE_RUN_SLOT}",
                within=slot_namespace,
                namespace=_namespace_index,
                scope=label_index(LABEL_SCOPE),
            )
        source = reader if reader is not None else transport
        self.secret_data = Contents(
            source, self.secrets.resource, self.secrets.store, whole=self.own_secrets.store
        )
        self.configmap_data = Contents(source, self.configmaps.resource, self.configmaps.store)

    def informers(self) -> list[Informer]:
        return [
            *self.objects.values(),
            self.jobs,
            self.secrets,
            self.own_secrets,
            self.configmaps,
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
        """Every cached CAPTF object, by kind (as stored: without apiVersion and kind)."""
        return {kind: list(inf.store) for kind, inf in self.objects.items()}

    def object(self, kind: str, namespace: str, name: str) -> Json | None:
        found = self.objects[kind].store.get(f"{namespace}/{name}")
        return None if found is None else with_kind(found, API_VERSION, kind)

    def objects_in(self, namespace: str) -> list[Json]:
        return [
            with_kind(o, API_VERSION, kind)
            for kind, inf in self.objects.items()
            for o in inf.store.by_index(BY_NAMESPACE, namespace)
        ]

    def objects_by(self, index: str, value: str) -> list[Json]:
        return [
            with_kind(o, API_VERSION, kind)
            for kind, inf in self.objects.items()
            for o in inf.store.by_index(index, value)
        ]

    def jobs_of(self, uid: str) -> list[Json]:
        return [self._job_view(j) for j in self.jobs.store.by_index(BY_UID, uid)]

    def job(self, namespace: str, name: str) -> Json | None:
        found = self.jobs.store.get(f"{namespace}/{name}")
        return None if found is None else self._job_view(found)

    def _job_view(self, job: Obj) -> Json:
        typed = with_kind(job, "batch/v1", "Job")
        return typed if self._job_clock is None else on_clock(typed, self._job_clock)

    async def load_contents(self, obj: Json) -> None:
        """Fetches the data `obj`'s decision reads that changed since it was last fetched."""
        ns = obj["metadata"]["namespace"]
        jobs = self.jobs_of(obj["metadata"]["uid"])
        # Values: to render the inputs, and to redact them from the Jobs' messages.
        carried = {name for job in jobs for name in job_secrets(job)}
        wanted = [Wanted(name) for name in {*referenced_secrets(obj), *carried}]
        wanted += [Wanted(name, keys_only=True) for name in self._plan_secrets(obj)]
        await self.secret_data.load(ns, wanted)
        configmaps = referenced_configmaps(obj)
        if configmaps:
            await self.configmap_data.load(ns, [Wanted(name) for name in configmaps])

    def snapshot(self, obj: Json) -> Snapshot:
        """Everything `decide` reads about `obj`, each part from an index or a key: the
        cost does not grow with the number of objects, Jobs or Secrets around it."""
        meta = obj["metadata"]
        ns, name = meta["namespace"], meta["name"]
        jobs = self.jobs_of(meta["uid"])
        secret_names = [state_secret_name(name), *referenced_secrets(obj)]
        secret_names += self._plan_secrets(obj)
        secret_names += [secret for job in jobs for secret in job_secrets(job)]
        prefix = inputs_secret_prefix(name)
        secret_names += [
            s["metadata"]["name"]
            for store in (self.own_secrets.store, self.secrets.store)
            for s in store.by_index(BY_INPUTS_OF, f"{ns}/{name}")
            if s["metadata"]["name"].startswith(prefix)
        ]
        return Snapshot(
            obj=obj,
            jobs=tuple(jobs),
            secrets=MappingProxyType(self._with_data(self.secret_data, ns, secret_names)),
            configmaps=MappingProxyType(
                self._with_data(self.configmap_data, ns, referenced_configmaps(obj))
            ),
            leases=tuple(self._leases(ns)),
            related=MappingProxyType(self._related(obj)),
        )

    def _plan_secrets(self, obj: Json) -> list[str]:
        names = (
            str((result(job) or {}).get("planSecret") or "")
            for job in self.jobs_of(obj["metadata"]["uid"])
        )
        return [name for name in names if name]

    def _with_data(self, contents: Contents, ns: str, names: Iterable[str]) -> dict[str, Json]:
        found: dict[str, Json] = {}
        for name in names:
            meta = contents.metadata_of(f"{ns}/{name}")
            if meta is None:
                continue
            data = contents.data(ns, name)
            found[name] = meta if data is None else meta | {"data": data}
        return found

    def _leases(self, ns: str) -> list[Json]:
        slots = [
            s for inf in self.lease_caches() for s in inf.store.by_index(BY_SCOPE, SCOPE_RUN_SLOT)
        ]
        seen = {id(lease) for lease in slots}
        store = self.leases.store
        local = [lease for lease in store.by_index(BY_NAMESPACE, ns) if id(lease) not in seen]
        return [with_kind(lease, "coordination.k8s.io/v1", "Lease") for lease in [*slots, *local]]

    def _related(self, obj: Json) -> dict[tuple[str, str], Json]:
        """The cluster, the dependencies and (for a cluster) the members, by (kind, name)."""
        meta = obj["metadata"]
        ns, uid = meta["namespace"], meta.get("uid")
        spec = _spec(obj)
        wanted = [(CLUSTER, _ref_name(spec.get("clusterRef")))]
        wanted += [
            (str(d.get("kind", "")), str(d.get("name", ""))) for d in spec.get("dependsOn") or []
        ]
        related: dict[tuple[str, str], Json] = {}
        for kind, name in wanted:
            other = self.object(kind, ns, name) if kind in self.objects and name else None
            if other is not None and other["metadata"].get("uid") != uid:
                related[(kind, name)] = other
        if obj.get("kind") == CLUSTER:
            for member in self.objects_by(BY_CLUSTER, f"{ns}/{meta['name']}"):
                if member["metadata"].get("uid") != uid:
                    related[(member["kind"], member["metadata"]["name"])] = member
        return related


def owner_key(job: Obj) -> str | None:
    """The object a CAPTF Job belongs to, from its labels."""
    labels = job.get("metadata", {}).get("labels") or {}
    kind, name = labels.get(LABEL_KIND), labels.get(LABEL_NAME)
    ns = job.get("metadata", {}).get("namespace")
    if kind not in KINDS or not name or not ns:
        return None
    return key_of(kind, ns, name)


def wire_handlers(caches: Caches, enqueue: Callable[[str], None]) -> None:
    """Which changes wake which objects. Handlers only enqueue keys: they run in the watch
    loop. Every fan-out goes through an index: a change wakes the objects it concerns, not
    its namespace."""

    def wake(objects: Iterable[Json]) -> None:
        for other in objects:
            other_meta = other["metadata"]
            enqueue(key_of(other["kind"], other_meta["namespace"], other_meta["name"]))

    def on_object(kind: str) -> Callable[[Obj | None, Obj | None], None]:
        def handler(old: Obj | None, new: Obj | None) -> None:
            obj = new or old
            assert obj is not None
            meta = obj["metadata"]
            ns, name = meta["namespace"], meta["name"]
            if not only_own_object_writes(old, new):
                enqueue(key_of(kind, ns, name))
            if _ready_changed(old, new) or _active_job(old) != _active_job(new):
                # Dependants and members wait on this object's Ready condition; a cluster
                # and its members wait while the other runs a Job (status.activeJob).
                wake(caches.objects_by(BY_DEPENDENCY, f"{ns}/{kind}/{name}"))
                if kind == CLUSTER:
                    wake(caches.objects_by(BY_CLUSTER, f"{ns}/{name}"))
                else:
                    cluster = caches.object(CLUSTER, ns, _ref_name(_spec(obj).get("clusterRef")))
                    wake([cluster] if cluster is not None else [])

        return handler

    for kind, inf in caches.objects.items():
        inf.add_handler(on_object(kind))

    def on_job(old: Obj | None, new: Obj | None) -> None:
        if only_own_job_writes(old, new):
            return
        key = owner_key(new or old or {})
        if key is not None:
            enqueue(key)

    caches.jobs.add_handler(on_job)

    def on_data(kind: str, contents: Contents) -> Callable[[Obj | None, Obj | None], None]:
        def handler(old: Obj | None, new: Obj | None) -> None:
            obj = new or old
            assert obj is not None
            meta = obj["metadata"]
            ns, name = meta.get("namespace", ""), meta["name"]
            if new is None:
                contents.forget(f"{ns}/{name}")
            # Objects that read it (module, variables, credentials, their state)...
            wake(caches.objects_by(BY_REF, f"{ns}/{kind}/{name}"))
            # ...and the object a Secret CAPTF wrote belongs to (inputs, plans).
            labels = meta.get("labels") or {}
            owner = labels.get(LABEL_NAME) or labels.get(LABEL_PLAN_OF)
            if owner:
                owner_kind = labels.get(LABEL_KIND)
                kinds = [owner_kind] if owner_kind in caches.objects else list(KINDS)
                found = [caches.object(k, ns, owner) for k in kinds]
                wake(o for o in found if o is not None)

        return handler

    caches.secrets.add_handler(on_data(SECRET, caches.secret_data))
    caches.own_secrets.add_handler(on_data(SECRET, caches.secret_data))
    caches.configmaps.add_handler(on_data(CONFIGMAP, caches.configmap_data))

    def on_lease(old: Obj | None, new: Obj | None) -> None:
        gone = set(member_jobs(old)) - set(member_jobs(new))
        if (holder_of(old) and not holder_of(new)) or gone:
            # A slot or an operation came free (a holder, or a member's entry on its
            # cluster's operation Lease): wake whoever waits for a Lease.
            wake(caches.objects_by(BY_WAITING, WAITING_FOR_LEASE))

    for leases in caches.lease_caches():
        leases.add_handler(on_lease)


def only_own_object_writes(old: Obj | None, new: Obj | None) -> bool:
    """Whether an update changed nothing but what the controller itself writes on a CAPTF
    object: status, its finalizer, the retry-capped label. Such an event must not wake the
    object again (the pass that wrote it already decided with it); any other change
    (spec, labels and annotations that are not ours, deletion, foreign finalizers) does."""
    if old is None or new is None:
        return False
    return _own_writes_aside(old) == _own_writes_aside(new)


def _own_writes_aside(obj: Obj) -> tuple[object, ...]:
    meta = obj["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != LABEL_RETRY_CAPPED}
    finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
    return (
        obj.get("spec"),
        meta.get("uid"),
        meta.get("deletionTimestamp"),
        meta.get("annotations") or {},
        labels,
        finalizers,
    )


def only_own_job_writes(old: Obj | None, new: Obj | None) -> bool:
    """Whether a Job update only set the controller's accounting annotation."""
    if old is None or new is None:
        return False
    return _accounting_aside(old) == _accounting_aside(new)


def _accounting_aside(job: Obj) -> tuple[object, ...]:
    meta = job["metadata"]
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != ANN_ACCOUNTED}
    return (job.get("status"), meta.get("deletionTimestamp"), meta.get("labels") or {}, notes)


def _active_job(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("activeJob") or "")


def _ready_changed(old: Obj | None, new: Obj | None) -> bool:
    return ready_of(old) != ready_of(new)
