"""A labelled gauge read from the controller replicas' /metrics, for `captf bench fleet`."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from controller.dev.replicas import metrics_url
from runtime.jsonobj import Json


def labelled(pods: Iterable[Json], family: str, label: str) -> dict[str, float]:
    """The samples of `family` by the value of `label`, the largest over the replicas (a
    standby exports none); blocking, run it in a thread."""
    found: dict[str, float] = {}
    for pod in pods:
        url = metrics_url(pod)
        if url is None:
            continue
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                page = answer.read().decode()
        except OSError:
            continue
        for metrics in text_string_to_metric_families(page):
            if metrics.name != family:
                continue
            for sample in metrics.samples:
                key = sample.labels.get(label, "")
                found[key] = max(found.get(key, 0.0), sample.value)
    return dict(sorted(found.items()))
