"""The controller's view of the cluster: one informer per resource it reads.

Everything DecideOp sees comes from here, so a decision made from the caches
and one made by `captf decide` from a file differ only in where the objects
came from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from controller.core.names import (
    API_VERSION,
    GROUP,
    KINDS,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_SCOPE,
    LABEL_UID,
    PLURALS,
    VERSION,
)
from controller.core.snapshot import Snapshot
from runtime.cache import Informer, Resource, Selection, label_index
from runtime.cache.reflector import ListWatchTransport
from runtime.cache.resource import Obj
from runtime.clock import Clock

Json = dict[str, Any]
BY_NAMESPACE = "namespace"
BY_UID = "uid"


def _namespace_index(obj: Obj) -> Iterable[str]:
    ns = obj.get("metadata", {}).get("namespace")
    return [ns] if ns else []


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
    def __init__(
        self, transport: ListWatchTransport, *, clock: Clock, namespace: str | None
    ) -> None:
        def informer(
            group: str, version: str, plural: str, *, labels: str | None = None, **indexers: Any
        ) -> Informer:
            selection = Selection(namespace=namespace, label_selector=labels)
            resource = Resource(group, version, plural)
            return Informer(
                transport, resource, clock=clock, selection=selection, indexers=indexers
            )

        self.objects = {
            kind: informer(GROUP, VERSION, PLURALS[kind], namespace=_namespace_index)
            for kind in KINDS
        }
        # Only CAPTF's Jobs: they all carry the uid label.
        self.jobs = informer("batch", "v1", "jobs", labels=LABEL_UID, uid=label_index(LABEL_UID))
        self.secrets = informer("", "v1", "secrets", namespace=_namespace_index)
        self.configmaps = informer("", "v1", "configmaps", namespace=_namespace_index)
        # Run slots and operation Leases carry the scope label; the leader Lease does not.
        self.leases = informer(
            "coordination.k8s.io", "v1", "leases", labels=LABEL_SCOPE, namespace=_namespace_index
        )

    def informers(self) -> list[Informer]:
        return [*self.objects.values(), self.jobs, self.secrets, self.configmaps, self.leases]

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

    def jobs_of(self, uid: str) -> list[Json]:
        return [with_kind(j, "batch/v1", "Job") for j in self.jobs.store.by_index(BY_UID, uid)]

    def job(self, namespace: str, name: str) -> Json | None:
        found = self.jobs.store.get(f"{namespace}/{name}")
        return None if found is None else with_kind(found, "batch/v1", "Job")

    def snapshot(
        self, obj: Json, *, pending_jobs: frozenset[str], max_concurrent_runs: int
    ) -> Snapshot:
        meta = obj["metadata"]
        ns = meta["namespace"]
        secrets = {
            s["metadata"]["name"]: with_kind(s, "v1", "Secret")
            for s in self.secrets.store.by_index(BY_NAMESPACE, ns)
        }
        configmaps = {
            c["metadata"]["name"]: with_kind(c, "v1", "ConfigMap")
            for c in self.configmaps.store.by_index(BY_NAMESPACE, ns)
        }
        leases = [
            with_kind(lease, "coordination.k8s.io/v1", "Lease") for lease in self.leases.store
        ]
        related = {
            (o["kind"], o["metadata"]["name"]): o
            for o in self.objects_in(ns)
            if o["metadata"].get("uid") != meta.get("uid")
        }
        return Snapshot(
            obj=obj,
            jobs=self.jobs_of(meta["uid"]),
            secrets=secrets,
            configmaps=configmaps,
            leases=leases,
            related=related,
            pending_jobs=pending_jobs,
            max_concurrent_runs=max_concurrent_runs,
        )


def owner_key(job: Obj) -> str | None:
    """The object a CAPTF Job belongs to, from its labels."""
    labels = job.get("metadata", {}).get("labels") or {}
    kind, name = labels.get(LABEL_KIND), labels.get(LABEL_NAME)
    ns = job.get("metadata", {}).get("namespace")
    if kind not in KINDS or not name or not ns:
        return None
    return key_of(kind, ns, name)


def wire_handlers(caches: Caches, enqueue: Callable[[str], None]) -> None:
    """Which changes wake which objects. Handlers only enqueue keys: they run in the watch loop."""

    def on_object(kind: str) -> Callable[[Obj | None, Obj | None], None]:
        def handler(old: Obj | None, new: Obj | None) -> None:
            obj = new or old
            assert obj is not None
            meta = obj["metadata"]
            enqueue(key_of(kind, meta["namespace"], meta["name"]))
            if _ready_changed(old, new) or _active_job(old) != _active_job(new):
                # Dependants and members wait on this object's Ready condition; a cluster
                # and its members wait while the other runs a Job (status.activeJob).
                for other in caches.objects_in(meta["namespace"]):
                    enqueue(key_of(other["kind"], meta["namespace"], other["metadata"]["name"]))

        return handler

    for kind, inf in caches.objects.items():
        inf.add_handler(on_object(kind))

    def on_job(old: Obj | None, new: Obj | None) -> None:
        key = owner_key(new or old or {})
        if key is not None:
            enqueue(key)

    caches.jobs.add_handler(on_job)

    def on_namespaced(old: Obj | None, new: Obj | None) -> None:
        # Module ConfigMaps, variables, credentials, state and plans: wake the namespace's
        # objects; the reconcile of an unaffected object changes nothing.
        obj = new or old
        assert obj is not None
        ns = obj["metadata"].get("namespace", "")
        for other in caches.objects_in(ns):
            enqueue(key_of(other["kind"], ns, other["metadata"]["name"]))

    caches.secrets.add_handler(on_namespaced)
    caches.configmaps.add_handler(on_namespaced)

    def on_lease(old: Obj | None, new: Obj | None) -> None:
        if _holder(old) and not _holder(new):
            # A slot or an operation came free: wake whoever waits for a Lease.
            for kind, inf in caches.objects.items():
                for other in inf.store:
                    reason = ((other.get("status") or {}).get("next") or {}).get("reason", "")
                    if str(reason).startswith("WaitingFor"):
                        meta = other["metadata"]
                        enqueue(key_of(kind, meta["namespace"], meta["name"]))

    caches.leases.add_handler(on_lease)


def _holder(lease: Obj | None) -> str:
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _active_job(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("activeJob") or "")


def _ready_changed(old: Obj | None, new: Obj | None) -> bool:
    def ready(obj: Obj | None) -> str | None:
        for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready":
                return str(cond.get("status"))
        return None

    return ready(old) != ready(new)
