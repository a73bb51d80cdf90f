"""Accounting is keyed to the Job's uid: a name that comes back is a new Job."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from controller.core.plan.accounting import Sample, event_name
from controller.io.accountant import JobMetrics


def _samples(registry: CollectorRegistry) -> float:
    value = registry.get_sample_value(
        "captf_job_attempts_count", {"kind": "TerraformCluster", "op": "apply", "outcome": "failed"}
    )
    return value or 0.0


def _failed(uid: str) -> Sample:
    return Sample(uid, "TerraformCluster", "apply", "failed", 1)


def test_one_event_name_per_incarnation() -> None:
    first = event_name("c1-apply-abcd1234", "uid-1", "JobFailed")
    again = event_name("c1-apply-abcd1234", "uid-1", "JobFailed")
    successor = event_name("c1-apply-abcd1234", "uid-2", "JobFailed")
    assert first == again == "c1-apply-abcd1234.uid-1.jobfailed"
    assert successor != first
    assert event_name("c1-apply-abcd1234", "", "JobFailed") == "c1-apply-abcd1234.jobfailed"


def test_one_sample_per_incarnation() -> None:
    registry = CollectorRegistry()
    metrics = JobMetrics(registry)
    assert metrics.observe(_failed("uid-1"))
    assert not metrics.observe(_failed("uid-1"))  # a replay
    assert metrics.observe(_failed("uid-2"))  # same name, new Job
    assert _samples(registry) == 2


def test_the_uids_remembered_are_bounded() -> None:
    metrics = JobMetrics(CollectorRegistry())
    metrics.REMEMBERED = 3
    for i in range(10):
        metrics.observe(_failed(f"uid-{i}"))
    assert not metrics.observe(_failed("uid-9"))
    assert metrics.observe(_failed("uid-0"))  # long forgotten
