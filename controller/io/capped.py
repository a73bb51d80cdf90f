"""The retry-capped tail as a gauge: objects labelled `captf.io/retry-capped=<op>`.

Computed from the informer caches at each scrape, so it counts exactly what
`kubectl get -l captf.io/retry-capped` lists (as of the cache) and needs no
bookkeeping of its own: a label added or cleared shows at the next scrape."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.core.basics.names import LABEL_RETRY_CAPPED

NAME = "captf_retry_capped_objects"


class ObjectStores(Protocol):
    """The CAPTF objects by kind, as the caches hold them."""

    def by_kind(self) -> Mapping[str, Iterable[dict[str, Any]]]: ...


def count(objects: Mapping[str, Iterable[dict[str, Any]]]) -> Counter[tuple[str, str, str]]:
    """(namespace, kind, op) -> how many objects carry the capped label for that op."""
    out: Counter[tuple[str, str, str]] = Counter()
    for kind, items in objects.items():
        for obj in items:
            meta = obj.get("metadata") or {}
            op = (meta.get("labels") or {}).get(LABEL_RETRY_CAPPED)
            if op:
                out[(str(meta.get("namespace", "")), kind, op)] += 1
    return out


class CappedCollector(Collector):
    def __init__(self, stores: ObjectStores) -> None:
        self._stores = stores

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            NAME,
            "CAPTF objects whose op's failures reached the limit (label captf.io/retry-capped)",
            labels=["namespace", "kind", "op"],
        )
        for labels, n in sorted(count(self._stores.by_kind()).items()):
            family.add_metric(list(labels), n)
        yield family


def register(registry: CollectorRegistry, stores: ObjectStores) -> None:
    registry.register(CappedCollector(stores))
