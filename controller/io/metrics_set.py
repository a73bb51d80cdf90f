"""Every metric the controller exports, registered in one place: `serve` calls
`register`, and the tests of the alerts and the dashboard ask `register` which names
exist (so a panel or an alert naming a metric nobody registers fails its test)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge

from controller.io import capped, object_metrics
from controller.io.accountant import JobMetrics
from controller.io.object_metrics import PassMetrics
from controller.io.stretcher import BackgroundMetrics
from controller.io.triggers import Triggers
from runtime.metrics import RuntimeMetrics


@dataclass(frozen=True)
class ControllerMetrics:
    """The recorders the controller's parts are handed; the scrape-time collectors
    (retry-capped, per-object) need none."""

    runtime: RuntimeMetrics
    jobs: JobMetrics
    passes: PassMetrics
    triggers: Triggers
    background: BackgroundMetrics


def register(
    registry: CollectorRegistry,
    stores: object_metrics.Stores,
    *,
    names: bool,
    longest_pause: Callable[[], float],
) -> ControllerMetrics:
    """All of them in `registry`; `names`: the per-object gauges' name label."""
    capped.register(registry, stores)
    object_metrics.register(registry, stores, names=names)
    Gauge(
        "captf_gc_longest_pause_seconds",
        "The longest garbage collection of this process so far",
        registry=registry,
    ).set_function(longest_pause)
    return ControllerMetrics(
        RuntimeMetrics(registry),
        JobMetrics(registry),
        PassMetrics(registry),
        Triggers(registry),
        BackgroundMetrics(registry),
    )


def exported(registry: CollectorRegistry) -> frozenset[str]:
    """The sample names `registry` exports or will once its series exist: a counter's
    `_total` (and `_created`), a histogram's `_bucket`, `_count`, `_sum`."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "summary": ("_count", "_sum", "_created"),
    }
    out: set[str] = set()
    for family in registry.collect():
        out.update(family.name + s for s in suffixes.get(family.type, ("",)))
    return frozenset(out)
