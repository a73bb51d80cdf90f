"""The outside view: watches on the API server, recorded in resourceVersion order.

Every write to the API server gets the next etcd revision, shared by all resources, and
an object's resourceVersion is the revision of its last write. So the revision of the
version in which a Job first appears (its create) and of the version in which it is
first terminal or deleted bound the time it ran, on one total order with every Lease and
Event write: no clocks, no watch latency. An object first seen through a re-list (after
an API server restart) shows only its latest version; its bounds are then marked inexact
and it is left out of the overlap counts rather than guessed.

The observer also fires armed triggers: a callback run inside the watch handler, the
moment a matching write is delivered (a Job create, a Lease take, a status write)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import orjson

from controller.core.basics.names import GROUP, VERSION
from runtime.cache import Informer, Resource, Selection
from runtime.cache.listing import Listed
from runtime.cache.reflector import Delta
from runtime.clock import LoopClock
from runtime.jsonobj import Json
from runtime.transport import Transport

JOBS = Resource("batch", "v1", "jobs")
LEASES = Resource("coordination.k8s.io", "v1", "leases")
EVENTS = Resource("", "v1", "events")
CAPTF = {
    "TerraformCluster": Resource(GROUP, VERSION, "terraformclusters"),
    "TerraformMachinePool": Resource(GROUP, VERSION, "terraformmachinepools"),
    "TerraformMachine": Resource(GROUP, VERSION, "terraformmachines"),
}
LEADER_LEASE = "captf-controller"
MEMBER_JOBS = "captf.io/member-jobs"
INFINITY = 1 << 62


def rv(obj: Json) -> int:
    return int(obj["metadata"].get("resourceVersion") or 0)


def terminal(job: Json) -> str:
    """ "Complete", "Failed", or "" while the Job runs."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return ""


def holder(lease: Json) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def claims(lease: Json) -> frozenset[str]:
    """The Jobs a Lease is held for: its holder, and the members' Jobs a cluster's
    operation Lease records in its `captf.io/member-jobs` annotation."""
    names = {holder(lease)} - {""}
    raw = (lease["metadata"].get("annotations") or {}).get(MEMBER_JOBS)
    if raw:
        with contextlib.suppress(ValueError):
            parsed = orjson.loads(raw)
            if isinstance(parsed, dict):
                names |= {str(k) for k in parsed}
    return frozenset(names)


@dataclass
class JobRecord:
    uid: str
    name: str
    owner: str  # the CAPTF object's uid (label captf.io/uid)
    op: str
    start: int  # revision of the create; exact only if `exact`
    end: int = INFINITY  # revision at which it was first seen terminal or deleted
    ended: str = ""  # Complete, Failed, deleted (while running)
    exact: bool = True
    accounted: bool = False
    gone: bool = False  # deleted from the API (while running or after)
    last: Json = field(default_factory=dict)


@dataclass
class EventRecord:
    name: str
    uid: str
    reason: str
    first_rv: int
    regarding: str  # involvedObject uid
    annotations: dict[str, str]


@dataclass
class LeaseRecord:
    namespace: str
    name: str
    scope: str  # label captf.io/scope (run-slot, cluster, member) or ""
    holder: str
    claims: frozenset[str]
    rv: int


@dataclass
class Armed:
    kind: str  # job-create, lease-take, status-write
    fire: Callable[[str], None]


class _Informer(Informer):
    """An informer that tells the observer where each delivery comes from."""

    observer: Observer

    def _apply(self, delta: Delta) -> None:
        self.observer.relisting = isinstance(delta, Listed)
        self.observer.delta_rv = int(delta.resource_version or 0)
        super()._apply(delta)


class Observer:
    """Watches one namespace's CAPTF objects, Jobs and Events, and the Leases of it and of
    the controller's namespace. `async with observer.running(transport):`."""

    def __init__(self, namespace: str, controller_namespace: str) -> None:
        self.namespace = namespace
        self.controller_namespace = controller_namespace
        self.jobs: dict[str, JobRecord] = {}
        self.events: dict[str, EventRecord] = {}  # by Event uid
        self.leases: dict[tuple[str, str], LeaseRecord] = {}
        self.objects: dict[str, Json] = {}  # CAPTF objects by uid, latest version
        self.leader = ""
        # (time.monotonic(), holder) at every change of the leader Lease's holder.
        self.leader_changes: list[tuple[float, str]] = []
        # Set by the informers before each delivery: whether it comes from a re-list, and
        # the revision of the watch event (or list) it comes from.
        self.relisting = False
        self.delta_rv = 0
        self._armed: Armed | None = None
        self._informers: list[Informer] = []

    # -- triggers ---------------------------------------------------------------------

    def arm(self, kind: str, fire: Callable[[str], None]) -> None:
        """Calls `fire(what)` once, from inside the watch handler, at the next write of
        that kind."""
        self._armed = Armed(kind, fire)

    def disarm(self) -> None:
        self._armed = None

    def _trigger(self, kind: str, what: str) -> None:
        armed = self._armed
        if armed is not None and armed.kind == kind:
            self._armed = None
            armed.fire(what)

    # -- running ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self, transport: Transport) -> AsyncIterator[Observer]:
        wall = LoopClock()
        ns = Selection(namespace=self.namespace)
        plan: Sequence[tuple[Resource, Selection, Callable[[Json | None, Json | None], None]]] = [
            (LEASES, ns, self._lease),
            (LEASES, Selection(namespace=self.controller_namespace), self._lease),
            (EVENTS, ns, self._event),
            (JOBS, ns, self._job),
        ] + [(res, ns, self._object) for res in CAPTF.values()]
        async with contextlib.AsyncExitStack() as stack:
            for resource, selection, handler in plan:
                informer = _Informer(transport, resource, clock=wall, selection=selection)
                informer.observer = self
                informer.add_handler(handler)
                await stack.enter_async_context(informer)
                self._informers.append(informer)
            for started in self._informers:
                await started.wait_synced()
            yield self

    # -- handlers ---------------------------------------------------------------------

    def _job(self, old: Json | None, new: Json | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        meta = obj["metadata"]
        record = self.jobs.get(meta["uid"])
        if record is None:
            labels = meta.get("labels") or {}
            fresh = old is None and new is not None and not terminal(new)
            record = JobRecord(
                uid=meta["uid"],
                name=meta["name"],
                owner=labels.get("captf.io/uid", ""),
                op=labels.get("captf.io/op", ""),
                start=rv(obj),
                # Only a watch delivers a create with the create's own revision.
                exact=fresh and not self.relisting,
            )
            self.jobs[record.uid] = record
            if fresh:
                self._trigger("job-create", f"Job {record.name}")
        if new is None:
            record.gone = True
            if record.end == INFINITY:
                # The store hands over the last version it had; the delete's own revision
                # is the watch event's (a re-list knows only an upper bound).
                record.end, record.ended = self.delta_rv, "deleted"
                record.exact = record.exact and not self.relisting
            return
        record.last = new
        if (new["metadata"].get("annotations") or {}).get("captf.io/accounted") == "true":
            record.accounted = True
        outcome = terminal(new)
        if outcome and record.end == INFINITY:
            record.end, record.ended = rv(new), outcome
            if self.relisting:
                record.exact = False
            else:
                self._trigger("job-finish", f"Job {record.name} {outcome}")

    def _lease(self, old: Json | None, new: Json | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        if new is None:
            self.leases.pop(key, None)
            return
        taken = holder(new)
        scope = (meta.get("labels") or {}).get("captf.io/scope", "")
        now = claims(new)
        self.leases[key] = LeaseRecord(key[0], key[1], scope, taken, now, rv(new))
        if meta["name"] == LEADER_LEASE and meta["namespace"] == self.controller_namespace:
            if taken != self.leader:
                self.leader = taken
                self.leader_changes.append((time.monotonic(), taken))
            return
        added = now - (claims(old) if old is not None else frozenset())
        if added:
            self._trigger("lease-take", f"Lease {meta['name']} for {', '.join(sorted(added))}")

    def _event(self, old: Json | None, new: Json | None) -> None:
        if new is None or old is not None:
            return
        meta = new["metadata"]
        involved = new.get("involvedObject") or new.get("regarding") or {}
        self.events[meta["uid"]] = EventRecord(
            name=meta["name"],
            uid=meta["uid"],
            reason=str(new.get("reason") or ""),
            first_rv=rv(new),
            regarding=str(involved.get("uid") or ""),
            annotations=dict(meta.get("annotations") or {}),
        )
        self._trigger("event-create", f"Event {meta['name']}")

    def _object(self, old: Json | None, new: Json | None) -> None:
        if new is None:
            return
        self.objects[new["metadata"]["uid"]] = new
        if old is not None and (old.get("status") or {}) != (new.get("status") or {}):
            self._trigger("status-write", f"status of {new['kind']}/{new['metadata']['name']}")

    # -- views ------------------------------------------------------------------------

    def running_jobs(self) -> list[JobRecord]:
        return [j for j in self.jobs.values() if j.end == INFINITY]

    def held_leases(self) -> list[LeaseRecord]:
        return [
            lease for lease in self.leases.values() if lease.claims and lease.name != LEADER_LEASE
        ]
