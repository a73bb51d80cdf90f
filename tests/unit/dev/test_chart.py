"""The chart is generated from manifests/, and alerts and dashboard read metrics that exist."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from controller.dev import chart
from controller.io import capped
from controller.io.accountant import JobMetrics
from runtime.clock import LoopClock
from runtime.metrics import RuntimeMetrics
from tests.paths import REPO

ROOT = REPO
MONITORING = ROOT / "manifests" / "monitoring"


def test_the_checked_in_chart_is_what_the_manifests_generate() -> None:
    assert chart.differences(ROOT) == [], "run `captf dev chart` after changing manifests/"


def test_a_manifest_change_the_chart_cannot_follow_fails_loudly(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "manifests", tmp_path / "manifests")
    deployment = tmp_path / "manifests" / "deployment.yaml"
    deployment.write_text(deployment.read_text().replace("replicas: 2", "replicas: 3"))
    with pytest.raises(chart.ChartError, match="replicas: 2"):
        chart.files(tmp_path)


def test_a_stale_chart_is_reported(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "manifests", tmp_path / "manifests")
    chart.write(tmp_path)
    assert chart.differences(tmp_path) == []
    rbac = tmp_path / "manifests" / "rbac.yaml"
    rbac.write_text(rbac.read_text() + "# a new comment\n")
    (tmp_path / chart.CHART / "templates" / "old.yaml").write_text("")
    assert chart.differences(tmp_path) == ["templates/rbac.yaml", "templates/old.yaml"]


class _Empty:
    def by_kind(self) -> dict[str, list[dict[str, object]]]:
        return {"TerraformCluster": [{"metadata": {"labels": {"captf.io/retry-capped": "x"}}}]}


def exported() -> set[str]:
    """Every sample name the controller's registry serves."""
    registry = CollectorRegistry()
    metrics = RuntimeMetrics(registry)
    metrics.queue("captf", clock=LoopClock())
    metrics.reconcile("captf")
    JobMetrics(registry)
    capped.register(registry, _Empty())
    names = set()
    for family in registry.collect():
        names.add(family.name)
        names |= {sample.name for sample in family.samples}
        if family.type == "histogram":
            names |= {family.name + suffix for suffix in ("_bucket", "_count", "_sum")}
        if family.type == "counter":
            names.add(family.name + "_total")
    return names


_WORDS = re.compile(r"\b([a-z_][a-z0-9_]*)\s*(?=\{|\[|\)|$| [<>]| by| \))")
_PROMQL = {"sum", "max", "min", "rate", "increase", "changes", "histogram_quantile", "by", "le"}


def metric_names(expr: str) -> set[str]:
    return {w for w in _WORDS.findall(expr) if w not in _PROMQL and "_" in w}


def test_alerts_read_only_metrics_the_controller_exports() -> None:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    alerts = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) >= {
        "CAPTFObjectsRetryCapped",
        "CAPTFReconcileErrors",
        "CAPTFLeaderChanges",
        "CAPTFJobsFailing",
    }
    names = exported()
    for alert, expr in alerts.items():
        used = metric_names(expr)
        assert used, alert
        assert used <= names, f"{alert} reads {used - names}"


def test_the_dashboard_reads_only_exported_metrics_and_shows_the_capped_tail() -> None:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    names = exported()
    for expr in exprs:
        used = metric_names(expr)
        assert used, expr
        assert used <= names, f"{expr} reads {used - names}"
    assert any(e.startswith("sum(captf_retry_capped_objects") for e in exprs)
