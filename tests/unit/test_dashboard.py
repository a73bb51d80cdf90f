"""The Grafana dashboard of manifests/monitoring/: every panel's queries read only metrics
the controller registers (controller/io/metrics_set.py), every query parses as PromQL once
Grafana's variables are filled in (`promtool check rules`, skipped until promtool is
built), and the panels a platform team looks for are there."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import REPO
from tests.unit.monitoring_support import exported_names, metric_names

DASHBOARD = REPO / "manifests" / "monitoring" / "grafana-dashboard.json"
BUILD = REPO / "hack" / "promtool" / "build.sh"
# Grafana's variables, as a query of the dashboard would see them.
FILLED = {"$__rate_interval": "1m", "$namespace": ".*"}


def panels() -> list[dict[str, Any]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def queries() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in panels() for t in p["targets"]]


def test_every_panel_has_queries_and_a_unique_id() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["targets"], panel["title"]


@pytest.mark.parametrize(("title", "expr"), queries())
def test_every_query_reads_only_exported_metrics(title: str, expr: str) -> None:
    named = metric_names(expr)
    assert named, f"{title}: {expr} names no metric"
    missing = named - exported_names()
    assert not missing, f"{title}: {sorted(missing)} are not exported"


def test_a_query_naming_an_unknown_metric_is_caught() -> None:
    """The check above can fail: a name the controller does not export is reported."""
    expr = 'sum(rate(captf_job_failures_total[5m])) / sum(captf_objects_ready{namespace="a"})'
    assert metric_names(expr) - exported_names() == {"captf_objects_ready"}


@pytest.mark.parametrize(
    "wanted",
    [
        "captf_objects_by_condition",  # objects by condition
        "captf_object_ready",  # fleet health: which object is not ready
        "captf_object_waiting_reason",  # backoff waits over time
        "captf_object_failures",  # retries
        "captf_runner_step_seconds_bucket",  # Job durations by op and step
        "captf_retry_capped_objects",  # capped objects
        "captf_lease_waits_total",
        "captf_identity_denied_total",
        "captf_object_state_bytes",
    ],
)
def test_the_panels_a_platform_team_looks_for(wanted: str) -> None:
    assert any(wanted in metric_names(expr) for _, expr in queries()), wanted


def test_step_durations_are_by_op_and_step() -> None:
    steps = [e for _, e in queries() if "captf_runner_step_seconds_bucket" in e]
    assert any("by (le, op, step)" in e for e in steps)


@pytest.fixture(scope="module")
def promtool() -> str:
    done = subprocess.run([str(BUILD), "--check"], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no promtool build ({done.stderr.strip()}); build it with `make promtool`")
    return done.stdout.strip().splitlines()[-1]


def test_every_query_parses(promtool: str, tmp_path: Path) -> None:
    """Each query as a recording rule, which `promtool check rules` parses."""
    rules = []
    for index, (_, expr) in enumerate(queries()):
        for variable, value in FILLED.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, expr
        rules.append({"record": f"dashboard:query_{index}", "expr": expr})
    path = tmp_path / "dashboard.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"SUCCESS: {len(rules)} rules found", done.stdout), done.stdout
