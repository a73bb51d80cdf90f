"""`captf bench fleet`'s reading of what it watched (controller/bench/fleet_watch.py) and
of the API server's audit log (controller/bench/fleet_audit.py)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from controller.bench import fleet_audit
from controller.bench.fleet_objects import per_cluster, scale_up_of
from controller.bench.fleet_watch import Fleet, kind_of
from runtime.jsonobj import Json


@pytest.mark.parametrize(
    ("labels", "kind"),
    [
        ({"captf.io/op": "refresh", "captf.io/kind": "TerraformMachine"}, "health"),
        ({"captf.io/op": "refresh", "captf.io/kind": "TerraformMachinePool"}, "membership"),
        ({"captf.io/op": "refresh", "captf.io/kind": "TerraformCluster"}, "refresh"),
        ({"captf.io/op": "drift", "captf.io/kind": "TerraformMachine"}, "drift"),
        ({"captf.io/op": "apply", "captf.io/kind": "TerraformMachine"}, "apply"),
    ],
)
def test_kinds(labels: dict[str, str], kind: str) -> None:
    assert kind_of(labels) == kind


def test_the_fleet_spread_and_its_scale_up() -> None:
    args = argparse.Namespace(machines=31, clusters=3, scale_up=0)
    assert [per_cluster(args, i) for i in range(3)] == [11, 10, 10]
    assert scale_up_of(args) == 4  # a third of 31, over 3 clusters, rounded up
    assert scale_up_of(argparse.Namespace(machines=30, clusters=2, scale_up=7)) == 7


def _job(name: str, op: str, kind: str = "TerraformMachine", infra: str = "m") -> Json:
    labels = {"captf.io/op": op, "captf.io/kind": kind, "captf.io/name": infra}
    return {"metadata": {"name": name, "labels": labels}, "status": {}}


def test_occupancy_and_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("controller.bench.fleet_watch.time.monotonic", lambda: now[0])
    fleet = Fleet()
    fleet.machine(None, {"metadata": {"name": "M1"}, "status": {}})
    fleet.terraform_machine(
        None, {"metadata": {"name": "m1", "ownerReferences": [{"kind": "Machine", "name": "M1"}]}}
    )
    now[0] = 103.5
    fleet.job(None, _job("m1-apply-1", "apply", infra="m1"))
    fleet.job(None, _job("m2-refresh-1", "refresh", infra="m2"))
    slot = {"metadata": {"name": "captf-run-slot-0", "labels": {"captf.io/scope": "run-slot"}}}
    fleet.lease(None, slot | {"spec": {"holderIdentity": "m2-refresh-1"}})
    fleet.lease(
        None,
        {
            **slot,
            "metadata": {**slot["metadata"], "name": "captf-run-slot-1"},
            "spec": {"holderIdentity": "m1-apply-1"},
        },
    )
    fleet.sample()
    assert fleet.waits({"M1"}) == {"p50": 3.5, "p99": 3.5, "count": 1, "machines": 1}
    assert fleet.jobs_between(0, 200) == {"apply": 1, "health": 1}
    occupancy = fleet.occupancy_between(0, 200, slots=2)
    assert (occupancy["background_mean"], occupancy["change_mean"]) == (1.0, 1.0)
    assert occupancy["all_held_share"] == 1.0


def test_the_audit_log_by_who_and_what(tmp_path: Path) -> None:
    def event(user: str, verb: str, resource: str, at: str, sub: str = "") -> bytes:
        ref = {"resource": resource} | ({"subresource": sub} if sub else {})
        return orjson.dumps(
            {
                "stage": "ResponseComplete",
                "verb": verb,
                "objectRef": ref,
                "user": {"username": user},
                "stageTimestamp": at,
            }
        )

    controller = fleet_audit.CONTROLLER_ACCOUNT
    runner = "system:serviceaccount:default:captf-runner"
    log = tmp_path / "audit.log"
    log.write_bytes(
        b"\n".join(
            [
                event(controller, "get", "leases", "2026-12-05T10:00:01Z"),
                event(controller, "patch", "terraformmachines", "2026-12-05T10:00:02Z", "status"),
                event(runner, "get", "secrets", "2026-12-05T10:00:03Z"),
                event(runner, "get", "secrets", "2026-12-05T11:00:00Z"),  # after the span
                b'{"stage": "ResponseComplete", "half a line',
            ]
        )
    )
    span = datetime(2026, 12, 5, 10, tzinfo=UTC), datetime(2026, 12, 5, 10, 30, tzinfo=UTC)
    found = fleet_audit.requests_between(log, *span)
    assert fleet_audit.per_job(found, 2) == {
        "jobs": 2,
        "total": 1.5,
        "controller": {"total": 1.0, "get leases": 0.5, "patch terraformmachines/status": 0.5},
        "runner": {"total": 0.5, "get secrets": 0.5},
    }


def test_the_budget_and_the_reads_as_the_bench_counts_them(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr("controller.bench.fleet_watch.time.monotonic", lambda: now[0])
    fleet = Fleet()
    for i, at in enumerate([1.0, 1.5, 1.9, 4.0, 9.0]):
        now[0] = at
        fleet.job(None, _job(f"m{i % 2}-refresh-{i}", "refresh", infra=f"m{i % 2}"))
    now[0] = 2.0
    fleet.job(None, _job("x-apply-1", "apply", infra="x"))  # a change: not counted
    assert fleet.most_background_in(0, 10, window=2.0) == 3  # 1.0, 1.5, 1.9
    assert fleet.most_background_in(0, 10, window=0.3) == 1
    # m0 read at 1.0, 1.9, 9.0: its longest gap 7.1; m1 at 1.5, 4.0: 6.0 to the end.
    assert sorted(round(g, 2) for g in fleet.read_gaps(0, 10)) == [6.0, 7.1]
