"""What the alerts' and the dashboard's tests check names against: the metrics the
controller registers (controller/io/metrics_set.py, on empty stores), and the metric
names a PromQL expression reads."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from controller.io import metrics_set

# PromQL words that are no metric names: keywords and the aggregation modifiers.
_WORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless"}
    | {"bool", "offset", "inf", "nan"}
)
# Label lists after a modifier; braces (matchers); ranges and subqueries; strings.
_STRIP = (
    re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"),
    re.compile(r"\{[^}]*\}"),
    re.compile(r"\[[^\]]*\]"),
    re.compile(r'"(?:[^"\\]|\\.)*"'),
)
_IDENT = re.compile(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")


class _NoObjects:
    def by_kind(self) -> Mapping[str, Iterable[dict[str, Any]]]:
        return {}

    def own_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def jobs_of(self, uid: str) -> list[dict[str, Any]]:
        return []


def exported_names() -> frozenset[str]:
    registry = CollectorRegistry()
    metrics_set.register(registry, _NoObjects(), names=True, longest_pause=lambda: 0.0)
    return metrics_set.exported(registry)


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` reads (functions, keywords and label names left out)."""
    for pattern in _STRIP:
        expr = pattern.sub(" ", expr)
    return {word for word in _IDENT.findall(expr) if word.lower() not in _WORDS}
