"""The chart is generated from manifests/, and alerts and dashboard read metrics that exist."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from controller.dev import chart
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


# What the alerts and the dashboard read is checked against what the controller
# registers in tests/unit/test_alerts.py and tests/unit/test_dashboard.py.
