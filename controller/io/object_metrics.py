"""Which object is unhealthy: per-object gauges computed from the caches at each scrape.

Nothing is kept between scrapes: each collect reads the cached CAPTF objects, their
state Secrets and their Jobs, so a gauge says what the cache says at that moment, a
deleted object's series disappear at the next scrape, and a restarted controller
exports the same values once its caches have synced (everything read is rebuildable,
as the status is).

Cardinality is bounded by the objects: each family has the labels namespace, kind and
name (plus `op` on failures and `reason` on the waiting reason, one value per object at
a time). With `names=False` (`captf run --no-metrics-object-names`, for very large
fleets) the name label goes and each family is aggregated per namespace and kind: the
0/1 gauges and the waiting reason are summed (how many objects), a time is the oldest
(the one an alert wants), bytes and failures the largest. The alerts in
manifests/monitoring/prometheusrule.yaml hold in both shapes.

The counters at the end are not computed at scrape time: they count reconcile passes
(a lease wait, an identity that denied a Job) as the reconciler reports them."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.core import Outcome, OwnerMark, finished_at, result
from controller.core.basics.names import (
    COND_IDENTITY_ALLOWED,
    DATA_BYTES,
    STATE_SIZE_LIMIT,
    Reason,
    labelled_for,
    legacy_state_secret_name,
    state_secret_name,
)
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.io.caches import Caches
from controller.io.indexes import BY_UID
from runtime.jsonobj import Json

Labels = tuple[str, ...]

PREFIX: Final = "captf_object_"
Combine = Callable[[list[float]], float]
_SUM: Final[Combine] = lambda values: float(sum(values))  # noqa: E731
_MIN: Final[Combine] = min
_MAX: Final[Combine] = max
# suffix -> (help, how the values of one (namespace, kind) combine without names)
FAMILIES: Final[dict[str, tuple[str, Combine]]] = {
    "ready": ("1 while the object's Ready condition is True, else 0", _SUM),
    "infrastructure_healthy": (
        "1 while InfrastructureHealthy is True, 0 while it is not (absent: no health output)",
        _SUM,
    ),
    "drift_detected": ("1 while DriftDetected is True, 0 once a drift check found none", _SUM),
    "last_success_timestamp_seconds": (
        "When the object's newest successful Job finished (absent: none yet)",
        _MIN,
    ),
    "state_bytes": ("Bytes of the object's state Secret (the limit is 1 MiB)", _MAX),
    "deleting_since_timestamp_seconds": (
        "When the object was deleted, while its destroy (or what holds it) goes on",
        _MIN,
    ),
    "failures": ("Consecutive failures of an op since its last success (status.failures)", _MAX),
    "waiting_reason": ("1 for the reason the object waits for now (status.next.reason)", _SUM),
}
# The labels beyond namespace, kind and name of each family.
EXTRA: Final = {"failures": ("op",), "waiting_reason": ("reason",)}
CONDITIONS: Final = "captf_objects_by_condition"
# The lease-wait reason of a claim that found the Lease taken.
LEASE_BUSY: Final = "LeaseBusy"
STATE_LIMIT: Final = "captf_state_size_limit_bytes"
# The waits that mean a Lease is held by someone else.
LEASE_WAITS: Final = frozenset(
    {
        Reason.WAITING_FOR_RUN_LEASE,
        Reason.WAITING_FOR_CLUSTER_OPERATION,
        Reason.WAITING_FOR_MACHINE_OPERATIONS,
    }
)


class Stores(Protocol):
    """What the collector reads: the objects by kind, a Secret as cached, an object's Jobs."""

    def by_kind(self) -> Mapping[str, Iterable[Json]]: ...

    def own_secret(self, namespace: str, name: str) -> Json | None: ...

    def jobs_of(self, uid: str) -> list[Json]: ...


@dataclass(frozen=True)
class Sample:
    family: str
    labels: Labels  # namespace, kind, name, then the family's EXTRA
    value: float


def _condition(obj: Json, kind: str) -> Json | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def _seconds(text: object) -> float | None:
    try:
        return parse_time(str(text)).timestamp() if text else None
    except TimeFormatError:
        return None


def last_success(obj: Json, jobs: Iterable[Json]) -> float | None:
    """The newest finish of a successful Job: the cached Jobs, and status.lastRun (which
    outlives pruning)."""
    run = (obj.get("status") or {}).get("lastRun") or {}
    found = [_seconds(run.get("finishedAt"))] if run.get("result") == Outcome.SUCCESS else []
    for job in jobs:
        res = result(job) or {}
        at = finished_at(job)
        if res.get("outcome") == Outcome.SUCCESS and at is not None:
            found.append(at.timestamp())
    times = [t for t in found if t is not None]
    return max(times) if times else None


def samples(obj: Json, stores: Stores) -> Iterator[Sample]:
    """The object's gauges."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    base: Labels = (str(meta.get("namespace", "")), str(obj.get("kind", "")), meta.get("name", ""))
    ready = _condition(obj, "Ready")
    yield Sample("ready", base, float(bool(ready and ready.get("status") == "True")))
    if (healthy := _condition(obj, "InfrastructureHealthy")) is not None:
        yield Sample("infrastructure_healthy", base, float(healthy.get("status") == "True"))
    if (drift := _condition(obj, "DriftDetected")) is not None:
        yield Sample("drift_detected", base, float(drift.get("status") == "True"))
    if (at := last_success(obj, stores.jobs_of(str(meta.get("uid", ""))))) is not None:
        yield Sample("last_success_timestamp_seconds", base, at)
    state = _state_of(stores, *base)
    if state is not None and isinstance(state.get(DATA_BYTES), int):
        yield Sample("state_bytes", base, float(state[DATA_BYTES]))
    if (deleted := _seconds(meta.get("deletionTimestamp"))) is not None:
        yield Sample("deleting_since_timestamp_seconds", base, deleted)
    for op, failures in sorted((status.get("failures") or {}).items()):
        if isinstance(failures, dict) and isinstance(failures.get("count"), int):
            yield Sample("failures", (*base, op), float(failures["count"]))
    reason = (status.get("next") or {}).get("reason")
    if reason:
        yield Sample("waiting_reason", (*base, str(reason)), 1.0)


def condition_counts(objects: Iterable[Json]) -> dict[Labels, int]:
    """(namespace, kind, type, status, reason) -> how many objects show that condition."""
    out: dict[Labels, int] = defaultdict(int)
    for obj in objects:
        meta = obj.get("metadata") or {}
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if isinstance(cond, dict) and cond.get("type"):
                key = (meta.get("namespace", ""), obj.get("kind", ""), cond["type"])
                out[(*key, str(cond.get("status", "")), str(cond.get("reason", "")))] += 1
    return out


def combined(rows: Iterable[Sample], names: bool) -> dict[str, dict[Labels, float]]:
    """family -> labels -> value; without names, one value per (namespace, kind, extra)."""
    grouped: dict[str, dict[Labels, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        labels = row.labels if names else (*row.labels[:2], *row.labels[3:])
        grouped[row.family][labels].append(row.value)
    out: dict[str, dict[Labels, float]] = {}
    for family, by_labels in grouped.items():
        how = FAMILIES[family][1]
        out[family] = {labels: how(values) for labels, values in by_labels.items()}
    return out


class ObjectCollector(Collector):
    def __init__(self, stores: Stores, *, names: bool = True) -> None:
        self._stores = stores
        self._names = names

    def collect(self) -> Iterator[GaugeMetricFamily]:
        objects = [o for items in self._stores.by_kind().values() for o in items]
        values = combined((s for o in objects for s in samples(o, self._stores)), self._names)
        identity = ["namespace", "kind", "name"] if self._names else ["namespace", "kind"]
        for family, (text, _) in FAMILIES.items():
            metric = GaugeMetricFamily(
                PREFIX + family, text, labels=[*identity, *EXTRA.get(family, ())]
            )
            for labels, value in sorted(values.get(family, {}).items()):
                metric.add_metric(list(labels), value)
            yield metric
        counts = GaugeMetricFamily(
            CONDITIONS,
            "CAPTF objects by condition type, status and reason",
            labels=["namespace", "kind", "type", "status", "reason"],
        )
        for labels, n in sorted(condition_counts(objects).items()):
            counts.add_metric(list(labels), n)
        yield counts
        yield GaugeMetricFamily(
            STATE_LIMIT, "The largest state CAPTF stores (docs/state.md)", STATE_SIZE_LIMIT
        )


class PassMetrics:
    """Counters of reconcile passes, told by the reconciler: `waited` once per pass,
    `marked` once per remediation mark carried out."""

    # Marks remembered so a pass replayed before the cache shows the mark (it patches the
    # same two keys again) is not counted twice; a restarted process counts afresh.
    REMEMBERED = 10_000

    def __init__(self, registry: CollectorRegistry) -> None:
        self._marks: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self.remediation_requests = Counter(
            "captf_remediation_requests_total",
            "Remediation marks (cluster.x-k8s.io/remediate-machine) set on a TerraformMachine's "
            "Machine or withdrawn from it, by reason (RemediationRequested, "
            "RemediationWithdrawn)",
            ["namespace", "kind", "reason"],
            registry=registry,
        )
        self.lease_waits = Counter(
            "captf_lease_waits_total",
            "Reconcile passes whose Job waited for a Lease another Job holds (a run slot, "
            "the cluster's or its members' operations), by reason",
            ["namespace", "kind", "reason"],
            registry=registry,
        )
        self.identity_denied = Counter(
            "captf_identity_denied_total",
            "Reconcile passes whose Job a TerraformClusterIdentity held back, by the "
            "IdentityAllowed reason (IdentityNotFound, NamespaceNotAllowed, SecretMissing, "
            "SecretKeysMissing)",
            ["namespace", "kind", "reason"],
            registry=registry,
        )

    def waited(self, obj: Json, reason: str, conditions: Iterable[Json]) -> None:
        """One pass of `obj` that waits for `reason`; `conditions`: the status it leaves."""
        namespace, kind = str(obj["metadata"].get("namespace", "")), str(obj.get("kind", ""))
        if reason in LEASE_WAITS:
            self.lease_waits.labels(namespace, kind, reason).inc()
        if reason != Reason.CREDENTIALS_NOT_READY:
            return
        for cond in conditions:
            if cond.get("type") == COND_IDENTITY_ALLOWED and cond.get("status") == "False":
                self.identity_denied.labels(namespace, kind, str(cond.get("reason", ""))).inc()

    def marked(self, obj: Json, mark: OwnerMark) -> None:
        """A remediation mark was patched onto (or off) the owner Machine; counted once per
        reading that decided it, as its Event is recorded once."""
        once = (str(obj["metadata"].get("uid", "")), mark.reason, mark.reading)
        if once in self._marks:
            return
        self._marks[once] = None
        while len(self._marks) > self.REMEMBERED:
            self._marks.popitem(last=False)
        namespace, kind = str(obj["metadata"].get("namespace", "")), str(obj.get("kind", ""))
        self.remediation_requests.labels(namespace, kind, mark.reason).inc()

    def lease_busy(self, obj: Json) -> None:
        """A claim found a Lease taken that the decision read as free (the cache behind)."""
        namespace, kind = str(obj["metadata"].get("namespace", "")), str(obj.get("kind", ""))
        self.lease_waits.labels(namespace, kind, LEASE_BUSY).inc()


class CacheStores:
    """`Stores` over the controller's caches. The Jobs as the informer holds them, with
    their wall-clock times (a scaled decision clock moves only the decisions' view)."""

    def __init__(self, caches: Caches) -> None:
        self._caches = caches

    def by_kind(self) -> Mapping[str, Iterable[Json]]:
        return self._caches.by_kind()

    def own_secret(self, namespace: str, name: str) -> Json | None:
        return self._caches.own_secrets.store.get(f"{namespace}/{name}")

    def jobs_of(self, uid: str) -> list[Json]:
        return list(self._caches.jobs.store.by_index(BY_UID, uid))


def register(registry: CollectorRegistry, stores: Stores, *, names: bool = True) -> None:
    registry.register(ObjectCollector(stores, names=names))


def _state_of(stores: Stores, namespace: str, kind: str, name: str) -> Json | None:
    """The object's state Secret as cached: under its name, else under the name before
    kinds were part of it, labelled for the object (as the snapshot reads it)."""
    for secret in (state_secret_name(namespace, kind, name), legacy_state_secret_name(name)):
        found = stores.own_secret(namespace, secret)
        if found is not None and labelled_for(found, kind, name):
            return found
    return None
