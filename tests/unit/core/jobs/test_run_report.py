"""The vocabulary of a run's report: error kinds, summaries without values, steps."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from controller.core.decide import snapshot
from controller.core.jobs.run_report import (
    ERROR_KINDS,
    SUMMARY_LIMIT,
    headline,
    is_lock_error,
    one_line,
    runtime_version,
)
from controller.core.plan.accounting import StepSample, accounting_of
from controller.io.accountant import JobMetrics
from tests import builders as b

CRDS = Path(__file__).resolve().parents[4] / "manifests" / "crds"
KINDS = ("terraformclusters", "terraformmachines", "terraformmachinepools")


@pytest.mark.parametrize(
    ("stderr", "summary"),
    [
        ("Error: Invalid value for variable\n", "Invalid value for variable"),
        (
            '╷\n│ Error: creating EC2 Instance (i-0123456789abcdef0): StatusCode: 403, "x"\n│\n',
            "creating EC2 Instance (…): StatusCode: …, …",
        ),
        ("warning first\nError: one\nError: two\n", "one"),
        ("Error: failed reading key AKIAIOSFODNN7EXAMPLE\n", "failed reading key …"),
        ("Error: url https://user:pw@example.com/x failed\n", "url … failed"),
        ("no headline here\n", None),
    ],
)
def test_a_summary_is_the_first_headline_without_its_values(
    stderr: str, summary: str | None
) -> None:
    found = headline(stderr)
    assert (one_line(found) if found is not None else None) == summary


def test_a_summary_is_one_line_of_at_most_the_limit() -> None:
    line = one_line("word " * 100 + "\nsecond line")
    assert len(line) <= SUMMARY_LIMIT
    assert "second" not in line
    assert line.endswith("…")


def test_lock_errors_are_recognised() -> None:
    assert is_lock_error("│ Error: Error acquiring the state lock\n")
    assert not is_lock_error("Error: creating thing\n")


def test_the_runtime_version_is_a_version_or_nothing() -> None:
    assert runtime_version(b'{"terraform_version":"1.10.0-beta1"}') == "1.10.0-beta1"
    assert runtime_version(b'{"terraform_version":"$(curl x)"}') is None
    assert runtime_version(b"[1]") is None


@pytest.mark.parametrize("kind", KINDS)
def test_the_crds_error_kinds_are_the_closed_set(kind: str) -> None:
    crd = yaml.safe_load((CRDS / f"infrastructure.cluster.x-k8s.io_{kind}.yaml").read_text())
    for version in crd["spec"]["versions"]:
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        last_run = status["properties"]["lastRun"]
        assert set(last_run["properties"]["errorKind"]["enum"]) == ERROR_KINDS
        assert last_run["properties"]["summary"]["maxLength"] == SUMMARY_LIMIT


def _steps(*steps: tuple[str, int, float]) -> dict[str, object]:
    return {"steps": [{"name": n, "exitCode": c, "seconds": s} for n, c, s in steps]}


def test_each_step_is_observed_once_per_job() -> None:
    steps = _steps(("init", 0, 1.0), ("plan", 2, 2.0), ("apply", 1, 40.0), ("weird", 0, 1.0))
    job = b.job("apply", 1, "failed", result=steps)
    job["metadata"]["uid"] = "uid-job-1"
    snap = snapshot.build(b.captf(), [*b.base_objects(), job])
    [record] = snap.history
    sample = accounting_of(snap, snap.history, record).sample
    assert sample.steps == (
        StepSample("init", 1.0, "ok"),
        StepSample("plan", 2.0, "ok"),  # changes present, under -detailed-exitcode
        StepSample("apply", 40.0, "error"),
        StepSample("other", 1.0, "ok"),  # a label takes no name a runner image likes
    )
    registry = CollectorRegistry()
    metrics = JobMetrics(registry)
    assert metrics.observe(sample)
    assert not metrics.observe(sample)  # a replay in this process
    labels = {"kind": "TerraformCluster", "op": "apply", "step": "apply", "result": "error"}
    assert registry.get_sample_value("captf_runner_step_seconds_count", labels) == 1
    assert registry.get_sample_value("captf_runner_step_seconds_sum", labels) == 40.0


def test_malformed_steps_are_not_observed() -> None:
    job = b.job("apply", 1, "failed", result={"steps": [{"name": "init"}]})
    snap = snapshot.build(b.captf(), [*b.base_objects(), job])
    [record] = snap.history
    assert accounting_of(snap, snap.history, record).sample.steps == ()


@pytest.mark.parametrize(
    ("result", "error_kind"),
    [
        (
            {"error": {"kind": "cloud-throttled", "signal": "aws:Throttling", "summary": "x"}},
            "cloud-throttled",
        ),
        ({"error": {"kind": "apply", "summary": "x"}}, "apply"),
        ({}, "contract"),  # no result at all: the controller's own kind
    ],
)
def test_a_failure_is_counted_with_its_error_kind(
    result: dict[str, object], error_kind: str
) -> None:
    job = b.job("apply", 1, "failed" if result else None, result=result or None)
    job["metadata"]["uid"] = "uid-job-1"
    snap = snapshot.build(b.captf(), [*b.base_objects(), job])
    [record] = snap.history
    sample = accounting_of(snap, snap.history, record).sample
    assert sample.error_kind == error_kind
    registry = CollectorRegistry()
    JobMetrics(registry).observe(sample)
    labels = {"kind": "TerraformCluster", "op": "apply", "reason": "JobFailed"}
    assert (
        registry.get_sample_value("captf_job_failures_total", labels | {"error_kind": error_kind})
        == 1
    )


def test_a_success_is_counted_with_no_error_kind() -> None:
    job = b.job("apply", 1, "succeeded", result={"message": "applied"})
    snap = snapshot.build(b.captf(), [*b.base_objects(), job])
    [record] = snap.history
    assert accounting_of(snap, snap.history, record).sample.error_kind == ""
