"""Samples read from the controller replicas' /metrics, for `captf bench fleet`."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from controller.dev.replicas import metrics_url
from runtime.jsonobj import Json


def labelled(pods: Iterable[Json], family: str, label: str, sample: str = "") -> dict[str, float]:
    """The samples of `family` (of its series `sample`, when given: a counter's
    `<family>_total`) summed by the value of `label` in each replica, the largest
    replica's sum per value (a standby exports none, or zeros); blocking, run it in a
    thread."""
    found: dict[str, float] = {}
    for pod in pods:
        for key, value in _summed(_page(pod), family, label, sample).items():
            found[key] = max(found.get(key, 0.0), value)
    return dict(sorted(found.items()))


def _page(pod: Json) -> str:
    url = metrics_url(pod)
    if url is None:
        return ""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())
    except OSError:
        return ""


def _summed(page: str, family: str, label: str, sample: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for metrics in text_string_to_metric_families(page):
        if metrics.name != family:
            continue
        for one in metrics.samples:
            if sample and one.name != sample:
                continue
            key = one.labels.get(label, "")
            found[key] = found.get(key, 0.0) + one.value
    return found
