"""The per-object gauges, from cached objects, state Secrets and Jobs, as a scrape reads
them; the name-less shape; the pass counters."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.core import OwnerMark
from controller.core.basics.names import (
    DATA_BYTES,
    LABEL_KIND,
    LABEL_NAME,
    STATE_MANIFEST_KEY,
    STATE_SIZE_LIMIT,
    legacy_state_secret_name,
    state_secret_name,
)
from controller.io import object_metrics
from controller.io.object_metrics import ObjectCollector, PassMetrics
from controller.io.trimming import decoded_size, state_size
from runtime.jsonobj import Json

NS = "team-a"


class FakeStores:
    def __init__(
        self,
        objects: list[Json],
        states: Mapping[str, tuple[str, int]] | None = None,
        jobs: Mapping[str, list[Json]] | None = None,
    ) -> None:
        self.objects = objects
        # By Secret name: the state Secrets cached, each of a TerraformMachine of the
        # fixtures' (`state_of`), with the size trimming recorded.
        self.states = dict(states or {})
        self.jobs = dict(jobs or {})

    def by_kind(self) -> Mapping[str, Iterable[Json]]:
        out: dict[str, list[Json]] = {}
        for obj in self.objects:
            out.setdefault(obj["kind"], []).append(obj)
        return out

    def own_secret(self, namespace: str, name: str) -> Json | None:
        found = self.states.get(f"{namespace}/{name}")
        if found is None:
            return None
        owner, size = found
        labels = {LABEL_KIND: "TerraformMachine", LABEL_NAME: owner}
        return {"metadata": {"name": name, "labels": labels}, DATA_BYTES: size}

    def jobs_of(self, uid: str) -> list[Json]:
        return self.jobs.get(uid, [])


def state_of(name: str, size: int, *, legacy: bool = False) -> dict[str, tuple[str, int]]:
    """A TerraformMachine's cached state Secret (under the name before kinds, `legacy`)."""
    secret = (
        legacy_state_secret_name(name)
        if legacy
        else state_secret_name(NS, "TerraformMachine", name)
    )
    return {f"{NS}/{secret}": (name, size)}


def cond(kind: str, status: str, reason: str = "R") -> Json:
    return {"type": kind, "status": status, "reason": reason}


def obj(name: str, kind: str = "TerraformMachine", **status: Any) -> Json:
    return {
        "kind": kind,
        "metadata": {"namespace": NS, "name": name, "uid": f"uid-{name}"},
        "status": status,
    }


def job(outcome: str, completed: str) -> Json:
    result = json.dumps({"outcome": outcome})
    return {
        "metadata": {"name": "j", "annotations": {"captf.io/result": result}},
        "status": {
            "startTime": "2026-01-01T00:00:00Z",
            "completionTime": completed,
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }


def scrape(stores: FakeStores, *, names: bool = True) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(ObjectCollector(stores, names=names))
    return registry


def value(registry: CollectorRegistry, family: str, **labels: str) -> float | None:
    base = {"namespace": NS, "kind": "TerraformMachine"}
    return registry.get_sample_value(object_metrics.PREFIX + family, base | labels)


HEALTHY = obj(
    "m1",
    conditions=[cond("Ready", "True"), cond("InfrastructureHealthy", "True")],
    next={"reason": "Idle"},
)
SICK = obj(
    "m2",
    conditions=[
        cond("Ready", "False", "NotHealthy"),
        cond("InfrastructureHealthy", "False"),
        cond("DriftDetected", "True"),
    ],
    failures={"apply": {"count": 3, "lastFailedAt": "2026-01-01T00:00:00Z"}},
    next={"reason": "LastApplyFailedBackoff"},
    lastRun={"result": "succeeded", "finishedAt": "2026-01-01T01:00:00Z"},
)


@pytest.mark.parametrize(
    ("family", "name", "extra", "want"),
    [
        ("ready", "m1", {}, 1.0),
        ("ready", "m2", {}, 0.0),
        ("infrastructure_healthy", "m1", {}, 1.0),
        ("infrastructure_healthy", "m2", {}, 0.0),
        ("drift_detected", "m1", {}, None),  # no drift checks: no series
        ("drift_detected", "m2", {}, 1.0),
        ("failures", "m2", {"op": "apply"}, 3.0),
        ("failures", "m1", {"op": "apply"}, None),
        ("waiting_reason", "m2", {"reason": "LastApplyFailedBackoff"}, 1.0),
        ("waiting_reason", "m1", {"reason": "Idle"}, 1.0),
        ("state_bytes", "m1", {}, 4096.0),
        ("state_bytes", "m2", {}, None),  # no state Secret cached
        ("last_success_timestamp_seconds", "m1", {}, None),
        ("last_success_timestamp_seconds", "m2", {}, 1767229200.0),
    ],
)
def test_each_gauge_of_each_object(
    family: str, name: str, extra: dict[str, str], want: float | None
) -> None:
    stores = FakeStores([HEALTHY, SICK], states=state_of("m1", 4096))
    assert value(scrape(stores), family, name=name, **extra) == want


def test_the_newest_success_wins_over_status_and_failed_jobs() -> None:
    jobs = {
        "uid-m2": [
            job("succeeded", "2026-01-01T02:00:00Z"),
            job("failed", "2026-01-01T03:00:00Z"),
        ]
    }
    registry = scrape(FakeStores([SICK], jobs=jobs))
    # 02:00, not lastRun's 01:00 and not the failure at 03:00.
    assert value(registry, "last_success_timestamp_seconds", name="m2") == 1767232800.0


def test_a_deleting_object_says_since_when() -> None:
    deleting = obj("m3")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    registry = scrape(FakeStores([deleting, HEALTHY]))
    assert value(registry, "deleting_since_timestamp_seconds", name="m3") == 1767225600.0
    assert value(registry, "deleting_since_timestamp_seconds", name="m1") is None


def test_without_names_the_gauges_aggregate_per_namespace_and_kind() -> None:
    other = obj("m4", conditions=[cond("Ready", "True")], lastRun=SICK["status"]["lastRun"])
    other["status"]["lastRun"] = {"result": "succeeded", "finishedAt": "2026-01-01T05:00:00Z"}
    stores = FakeStores([HEALTHY, SICK, other], states=state_of("m1", 10) | state_of("m4", 99))
    registry = scrape(stores, names=False)
    assert value(registry, "ready") == 2.0  # how many are Ready
    assert value(registry, "state_bytes") == 99.0  # the largest
    assert value(registry, "last_success_timestamp_seconds") == 1767229200.0  # the oldest
    assert value(registry, "failures", op="apply") == 3.0
    assert value(registry, "waiting_reason", reason="Idle") == 1.0
    assert value(registry, "ready", name="m1") is None  # no name label at all


def test_objects_by_condition_count_without_names() -> None:
    registry = scrape(FakeStores([HEALTHY, SICK, obj("m5", conditions=[cond("Ready", "True")])]))
    labels = {"namespace": NS, "kind": "TerraformMachine", "type": "Ready"}
    true = labels | {"status": "True", "reason": "R"}
    assert registry.get_sample_value(object_metrics.CONDITIONS, true) == 2.0
    false = labels | {"status": "False", "reason": "NotHealthy"}
    assert registry.get_sample_value(object_metrics.CONDITIONS, false) == 1.0


def test_the_state_limit_is_exported() -> None:
    registry = scrape(FakeStores([]))
    assert registry.get_sample_value(object_metrics.STATE_LIMIT) == STATE_SIZE_LIMIT


def test_a_state_under_its_older_name_is_measured_until_it_moves() -> None:
    registry = scrape(FakeStores([HEALTHY], states=state_of("m1", 77, legacy=True)))
    assert value(registry, "state_bytes", name="m1") == 77.0


def test_another_objects_state_of_the_same_name_is_not_measured() -> None:
    # A Secret named as m1's state but labelled for a TerraformMachine m2.
    mislabelled = {k: ("m2", size) for k, (_, size) in state_of("m1", 5).items()}
    registry = scrape(FakeStores([HEALTHY], states=mislabelled))
    assert value(registry, "state_bytes", name="m1") is None


@pytest.mark.parametrize("size", [0, 17, 64 * 1024 * 1024])
def test_a_laid_out_state_measures_as_its_manifest_says(size: int) -> None:
    manifest = base64.b64encode(json.dumps({"size": size, "parts": []}).encode()).decode()
    body = base64.b64encode(b"compressed").decode()
    assert state_size({STATE_MANIFEST_KEY: manifest, "state.gz": body}) == size


def test_a_state_of_the_older_layout_measures_as_its_data() -> None:
    data = {"terraform.tfstate": base64.b64encode(b"x" * 40).decode()}
    assert state_size(data) == 40


def test_a_deleted_object_leaves_no_series() -> None:
    stores = FakeStores([HEALTHY])
    registry = scrape(stores)
    assert value(registry, "ready", name="m1") == 1.0
    stores.objects.clear()
    assert value(registry, "ready", name="m1") is None


@pytest.mark.parametrize(
    ("reason", "conditions", "leases", "denied"),
    [
        ("WaitingForRunLease", [], {"WaitingForRunLease": 1.0}, {}),
        ("WaitingForClusterOperation", [], {"WaitingForClusterOperation": 1.0}, {}),
        (
            "CredentialsNotReady",
            [cond("IdentityAllowed", "False", "NamespaceNotAllowed")],
            {},
            {"NamespaceNotAllowed": 1.0},
        ),
        # A Secret reference that is missing: no identity denied anything.
        ("CredentialsNotReady", [], {}, {}),
        ("InputsChangedBackoff", [cond("IdentityAllowed", "True", "IdentityAllowed")], {}, {}),
    ],
)
def test_pass_counters(
    reason: str,
    conditions: list[Json],
    leases: dict[str, float],
    denied: dict[str, float],
) -> None:
    registry = CollectorRegistry()
    passes = PassMetrics(registry)
    passes.waited(obj("m1"), reason, conditions)
    base = {"namespace": NS, "kind": "TerraformMachine"}
    for why in ("WaitingForRunLease", "WaitingForClusterOperation", "LeaseBusy"):
        got = registry.get_sample_value("captf_lease_waits_total", base | {"reason": why})
        assert got == leases.get(why), why
    for why in ("NamespaceNotAllowed", "IdentityNotFound"):
        got = registry.get_sample_value("captf_identity_denied_total", base | {"reason": why})
        assert got == denied.get(why), why
    passes.lease_busy(obj("m1"))
    busy = base | {"reason": object_metrics.LEASE_BUSY}
    assert registry.get_sample_value("captf_lease_waits_total", busy) == 1.0


def _mark(reason: str, reading: str) -> OwnerMark:
    return OwnerMark("m1", {"metadata": {"annotations": {}}}, reason, "", reading)


def test_remediation_marks_are_counted_once_per_deciding_reading() -> None:
    """captf_remediation_requests_total: a pass replayed before the cache shows the mark
    patches it again, and counts nothing more; the next reading's withdrawal counts."""
    registry = CollectorRegistry()
    passes = PassMetrics(registry)
    base = {"namespace": NS, "kind": "TerraformMachine"}
    requested = base | {"reason": "RemediationRequested"}
    withdrawn = base | {"reason": "RemediationWithdrawn"}
    assert registry.get_sample_value("captf_remediation_requests_total", requested) is None
    passes.marked(obj("m1"), _mark("RemediationRequested", "m1-refresh-00000003"))
    passes.marked(obj("m1"), _mark("RemediationRequested", "m1-refresh-00000003"))
    assert registry.get_sample_value("captf_remediation_requests_total", requested) == 1.0
    passes.marked(obj("m1"), _mark("RemediationWithdrawn", "m1-refresh-00000004"))
    passes.marked(obj("m1"), _mark("RemediationRequested", "m1-refresh-00000006"))
    assert registry.get_sample_value("captf_remediation_requests_total", requested) == 2.0
    assert registry.get_sample_value("captf_remediation_requests_total", withdrawn) == 1.0


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 1000, 1024 * 1024])
def test_decoded_size_of_secret_data(size: int) -> None:
    data = {"terraform.tfstate": base64.b64encode(b"x" * size).decode(), "other": ""}
    assert decoded_size(data) == size
