"""The alerts of manifests/monitoring/prometheusrule.yaml under `promtool test rules`
(promtool built from its Go module by hack/promtool/build.sh; skipped until built): every
alert has a case that fires and one that does not, and each case passes. The alerts name
only metrics the controller exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import REPO
from tests.unit.monitoring_support import exported_names, metric_names

RULE = REPO / "manifests" / "monitoring" / "prometheusrule.yaml"
CASES = REPO / "tests" / "monitoring" / "alerts_test.yaml"
BUILD = REPO / "hack" / "promtool" / "build.sh"


def alerts() -> list[dict[str, Any]]:
    rule = yaml.safe_load(RULE.read_text())
    return [r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r]


@pytest.fixture(scope="module")
def promtool() -> str:
    done = subprocess.run([str(BUILD), "--check"], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no promtool build ({done.stderr.strip()}); build it with `make promtool`")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PrometheusRule's spec as a plain rules file beside the cases."""
    directory = tmp_path_factory.mktemp("alerts")
    spec = yaml.safe_load(RULE.read_text())["spec"]
    (directory / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copy(CASES, directory / CASES.name)
    return directory


def test_the_rules_are_valid(promtool: str, workdir: Path) -> None:
    done = subprocess.run(
        [promtool, "check", "rules", str(workdir / "rules.yaml")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_case_passes(promtool: str, workdir: Path) -> None:
    done = subprocess.run(
        [promtool, "test", "rules", CASES.name], cwd=workdir, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    cases = yaml.safe_load(CASES.read_text())["tests"]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        for check in case["alert_rule_test"]:
            (fires if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {a["alert"] for a in alerts()}
    assert names - fires == set(), "alerts without a case where they fire"
    assert names - quiet == set(), "alerts without a case where they do not fire"
    assert (fires | quiet) - names == set(), "cases of alerts that do not exist"


def test_the_alerts_name_only_exported_metrics() -> None:
    exported = exported_names()
    for alert in alerts():
        named = metric_names(alert["expr"])
        assert named, alert["alert"]
        assert named <= exported, f"{alert['alert']}: {sorted(named - exported)}"


def test_the_cases_feed_only_exported_metrics() -> None:
    """A case that feeds a series the controller never exports tests nothing."""
    exported = exported_names()
    for case in yaml.safe_load(CASES.read_text())["tests"]:
        for series in case["input_series"]:
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", series["series"])
            assert name is not None
            assert name.group(0) in exported, series["series"]
