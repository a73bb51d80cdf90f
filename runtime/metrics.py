"""Prometheus collectors under controller-runtime's names.

Every collector lives in the registry passed in, never the process-global one,
so two controllers (or two tests) never share counts. The recorders below are
what the work queue and the controller loop are told of; they fill the
collectors with one label set each."""

from __future__ import annotations

from collections.abc import Hashable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from runtime.clock import Clock

# controller-runtime's workqueue buckets: 10 ns to 1000 s, one per decade.
_QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))
# controller-runtime's reconcile-time buckets: fine below 1 s, coarse up to a minute.
_RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45),
    *(0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5),
    *(5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)

# The `result` label values of controller_runtime_reconcile_total.
RESULTS = ("success", "error", "requeue", "requeue_after")


class RuntimeMetrics:
    """All runtime collectors, registered in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        q = ["name"]
        self.depth = Gauge("workqueue_depth", "Current depth of workqueue", q, registry=registry)
        self.adds = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            q,
            registry=registry,
        )
        self.retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            q,
            registry=registry,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            q,
            buckets=_QUEUE_BUCKETS,
            registry=registry,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            q,
            buckets=_QUEUE_BUCKETS,
            registry=registry,
        )
        c = ["controller"]
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            [*c, "result"],
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            c,
            registry=registry,
        )
        self.reconcile_unrecognized = Counter(
            "controller_runtime_reconcile_unrecognized_errors_total",
            "Reconcile errors not recognised as transient, retried at the rate limiter's cap",
            c,
            registry=registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            c,
            buckets=_RECONCILE_BUCKETS,
            registry=registry,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this process holds the named leader Lease, else 0",
            q,
            registry=registry,
        )

    def queue(self, name: str, clock: Clock) -> QueueMetrics:
        return QueueMetrics(self, name, clock)

    def reconcile(self, controller: str) -> ReconcileMetrics:
        return ReconcileMetrics(self, controller)


class QueueMetrics:
    """A `QueueObserver` (runtime/workqueue/queue.py) for the queue called `name`."""

    def __init__(self, metrics: RuntimeMetrics, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = metrics.depth.labels(name)
        self._adds = metrics.adds.labels(name)
        self._retries = metrics.retries.labels(name)
        self._queue_duration = metrics.queue_duration.labels(name)
        self._work_duration = metrics.work_duration.labels(name)
        # When each dirty item was first added; dropped when a worker takes it.
        self._added_at: dict[Hashable, float] = {}
        # When a worker took each item it still holds.
        self._taken_at: dict[Hashable, float] = {}

    def added(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(item, self._clock.monotonic())

    def taken(self, item: Hashable) -> None:
        now = self._clock.monotonic()
        self._depth.dec()
        if (added := self._added_at.pop(item, None)) is not None:
            self._queue_duration.observe(now - added)
        self._taken_at[item] = now

    def done(self, item: Hashable) -> None:
        if (taken := self._taken_at.pop(item, None)) is not None:
            self._work_duration.observe(self._clock.monotonic() - taken)

    def retried(self, item: Hashable) -> None:
        self._retries.inc()


class ReconcileMetrics:
    """A `ReconcileObserver` (runtime/loop.py) for the controller called `controller`."""

    def __init__(self, metrics: RuntimeMetrics, controller: str) -> None:
        self._total = {
            result: metrics.reconcile_total.labels(controller, result) for result in RESULTS
        }
        self._errors = metrics.reconcile_errors.labels(controller)
        self._unrecognized = metrics.reconcile_unrecognized.labels(controller)
        self._time = metrics.reconcile_time.labels(controller)
        # Touch every child, so each series is exported at 0 before it first happens.
        for result in RESULTS:
            self._total[result].inc(0)

    def reconciled(self, result: str, seconds: float) -> None:
        self._total[result].inc()
        self._time.observe(seconds)
        if result == "error":
            self._errors.inc()

    def unrecognized_error(self) -> None:
        self._unrecognized.inc()
