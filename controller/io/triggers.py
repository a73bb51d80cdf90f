"""What woke each reconcile: `captf_reconciles_total{kind, trigger}`.

A key's trigger is the watch whose event first queued it since its last reconcile: the
resource of the informer (`jobs`, `machines`, `secrets`, `leases` ...), or `self` when a
CAPTF object's (or a template's, an identity's) own event woke its own key. A reconcile
no watch asked for is `retry` when the one before asked the rate limiter (a conflict, a
Lease found taken, an error), `at_once` when it asked to come back at once, else
`requeue`: the decision's timed requeue. The work queue keeps one entry per key, so
later wakes of a key already queued are folded into the first; the map below is as
bounded as the queue (one entry per queued key, taken when its reconcile starts)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from controller.io.keys import parse_key
from runtime.loop import Result

REQUEUE = "requeue"
RETRY = "retry"
AT_ONCE = "at_once"
SELF = "self"


class Triggers:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._first: dict[str, str] = {}
        self.reconciles = Counter(
            "captf_reconciles_total",
            "Reconciles by the kind of their key and what woke it: the watched resource whose "
            "event queued the key (self: the object's own), retry (the rate limiter's), "
            "at_once (an immediate requeue) or requeue (a timed one)",
            ["kind", "trigger"],
            registry=registry,
        )

    def woke(self, key: str, source: str) -> None:
        """A watch event of `source` queues `key` (a no-op for the queue if it is queued)."""
        self._first.setdefault(key, source)

    def reconciling(self, key: str) -> str:
        """A reconcile of `key` starts: counts it under its trigger, which it returns."""
        trigger = self._first.pop(key, REQUEUE)
        self.reconciles.labels(parse_key(key)[0], trigger).inc()
        return trigger

    def ended(self, key: str, result: Result | None) -> None:
        """A reconcile of `key` ended with `result` (None: it raised). A retry or an
        immediate requeue comes before any timer: the next reconcile's trigger unless
        a watch woke the key meanwhile."""
        if result is None or result.requeue:
            self.woke(key, RETRY)
        elif result.requeue_after == 0.0:
            self.woke(key, AT_ONCE)
