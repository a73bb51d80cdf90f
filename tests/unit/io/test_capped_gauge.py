"""The retry-capped gauge's count: by namespace, kind and op, from the label alone."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from controller.io import capped


def _obj(ns: str, name: str, op: str | None) -> dict[str, Any]:
    labels = {"captf.io/retry-capped": op} if op else {"app": "x"}
    return {"metadata": {"namespace": ns, "name": name, "labels": labels}}


class Stores:
    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects

    def by_kind(self) -> dict[str, list[dict[str, Any]]]:
        return self.objects


def test_counts_by_namespace_kind_and_op() -> None:
    stores = Stores(
        {
            "TerraformCluster": [
                _obj("a", "c1", "apply"),
                _obj("a", "c2", "apply"),
                _obj("a", "c3", None),
            ],
            "TerraformMachine": [_obj("b", "m1", "destroy"), {"metadata": {"name": "bare"}}],
        }
    )
    registry = CollectorRegistry()
    capped.register(registry, stores)

    def value(ns: str, kind: str, op: str) -> float | None:
        return registry.get_sample_value(capped.NAME, {"namespace": ns, "kind": kind, "op": op})

    assert value("a", "TerraformCluster", "apply") == 2
    assert value("b", "TerraformMachine", "destroy") == 1
    assert value("a", "TerraformCluster", "destroy") is None
    # Read at each scrape: a label cleared is gone at the next one.
    stores.objects["TerraformCluster"] = []
    assert value("a", "TerraformCluster", "apply") is None
