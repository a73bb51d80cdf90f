"""Where `captf bench capi`'s reconciles go: `captf_reconciles_total{kind, trigger}`
(controller/io/triggers.py) over both replicas, scraped at the start of `scale_up` and
the end of `scale_down`, per Machine by kind, by trigger, and by the two together; and
the work queue's mean wait and work per key over the same span
(`workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`): whether keys
wait for a worker, or the workers for the API server."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from controller.dev.replicas import metrics_url
from runtime.jsonobj import Json

FAMILY = "captf_reconciles"  # the parser drops `_total`
# (histogram, what the report calls it): their `_sum` and `_count` are kept under
# (name, "sum") and (name, "count")
QUEUE = (("workqueue_queue_duration_seconds", "wait"), ("workqueue_work_duration_seconds", "work"))

Counts = Mapping[tuple[str, str], float]


def page_counts(page: str) -> dict[tuple[str, str], float]:
    """(kind, trigger) -> count on one /metrics page."""
    found: dict[tuple[str, str], float] = {}
    histograms = dict(QUEUE)
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if family.name == FAMILY and sample.name.endswith("_total"):
                key = (sample.labels.get("kind", ""), sample.labels.get("trigger", ""))
            elif family.name in histograms and sample.name.endswith(("_sum", "_count")):
                key = (histograms[family.name], sample.name.rsplit("_", 1)[1])
            else:
                continue
            found[key] = found.get(key, 0.0) + sample.value
    return found


def scrape_counts(pods: Iterable[Json]) -> dict[tuple[str, str], float]:
    """Summed over every replica's /metrics (blocking; run it in a thread); a replica that
    does not answer counts nothing."""
    total: dict[tuple[str, str], float] = {}
    for pod in pods:
        url = metrics_url(pod)
        if url is None:
            continue
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                for key, value in page_counts(answer.read().decode()).items():
                    total[key] = total.get(key, 0.0) + value
        except OSError:
            continue
    return total


def breakdown(before: Counts, after: Counts, machines: int) -> dict[str, Any]:
    """Per Machine, the reconciles between the two scrapes: by kind, by trigger, and by
    `kind<-trigger`, each largest first, zeros left out."""
    n = max(machines, 1)
    queue = {name for _, name in QUEUE}
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after if k[0] not in queue}
    by_kind: dict[str, float] = {}
    by_trigger: dict[str, float] = {}
    pairs: dict[str, float] = {}
    for (kind, trigger), count in delta.items():
        by_kind[kind] = by_kind.get(kind, 0.0) + count
        by_trigger[trigger] = by_trigger.get(trigger, 0.0) + count
        pairs[f"{kind}<-{trigger}"] = pairs.get(f"{kind}<-{trigger}", 0.0) + count
    return {
        "kind": _per(by_kind, n),
        "trigger": _per(by_trigger, n),
        "kind_trigger": _per(pairs, n),
    }


def _per(counts: dict[str, float], n: int) -> dict[str, float]:
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    return {k: round(v / n, 2) for k, v in ordered if v > 0}


def queue_means(before: Counts, after: Counts) -> dict[str, float | None]:
    """Mean seconds a key waited in the queue for a worker, and a worker spent on it,
    between the two scrapes."""
    out: dict[str, float | None] = {}
    for _, name in QUEUE:
        total = after.get((name, "sum"), 0.0) - before.get((name, "sum"), 0.0)
        count = after.get((name, "count"), 0.0) - before.get((name, "count"), 0.0)
        out[f"{name}_mean_s"] = round(total / count, 4) if count > 0 else None
    return out
