"""The per-cluster run cap in the decision (issue 37, item 4): an object whose cluster's
Jobs hold `--max-concurrent-runs-per-cluster` slots waits `WaitingForRunLease` whatever
else the slots show, as every slot held does: before spec.suspend and before the
family's waits, the gates' order. The gate and the hold ask the cap of the same Job
(claims.LeaseReading.capped, once per decision), so a free slot no longer turned the gate off."""

from __future__ import annotations

import pytest

from controller.core import plan_pass
from controller.core.basics.names import MACHINE
from controller.core.decide import snapshot
from controller.core.decide.decision import Run, to_json
from controller.core.decide.settings import Settings
from controller.core.decide.steps import decide
from controller.core.leases.slots import cluster_full
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    NS,
    base_objects,
    capi_cluster,
    captf,
    module_configmap,
    owners_of,
    secret,
)

HOME = "captf-system"
CAPPED = Settings(max_runs_per_cluster=2, slot_namespace=HOME)


def slot(
    i: int, holder: str | None, cluster: str = "c1", namespace: str = HOME, served: str = NS
) -> Json:
    """A run slot of the controller's namespace, last held for a Job of `served`'s `cluster`."""
    notes = {"captf.io/holder-namespace": served, "captf.io/holder-cluster": cluster}
    meta = {"name": f"captf-run-slot-{i}", "namespace": namespace, "annotations": notes}
    spec = {"holderIdentity": holder} if holder else {}
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


# Two members of c1 hold two slots, the cap; the other eight are free.
AT_CAP = [slot(0, "m7-apply-1"), slot(1, "m8-apply-1"), *(slot(i, None) for i in range(2, 10))]


def _machine(**spec: object) -> tuple[Json, list[Json]]:
    machine = captf(MACHINE, "m1", spec=spec)
    others = [
        module_configmap("m1"),
        secret("creds", {"t": "x"}),
        captf(ready=True),
        *owners_of(machine, cluster=capi_cluster("c1")),
    ]
    return machine, others


def _decided(obj: Json, others: list[Json], settings: Settings = CAPPED) -> Json:
    return to_json(decide(snapshot.build(obj, others), NOW, settings), verbose=True)


def test_a_free_slot_leaves_the_cap_standing() -> None:
    """The cap reads the slots its cluster holds; a free slot is no Job's, not even ""."""
    for job in ("", "m1-apply-1"):
        full = cluster_full(AT_CAP, job=job, own_jobs=(), namespace=HOME, cluster=(NS, "c1"), cap=2)
        assert full == (
            "cluster c1 holds 2 run slots, its cap (--max-concurrent-runs-per-cluster)"
        ), job


def test_a_machine_at_its_clusters_cap_waits_for_a_run_lease_and_starts_nothing() -> None:
    machine, others = _machine()
    out = _decided(machine, [*others, *AT_CAP])
    assert (out["action"], out["reason"], out["after"]) == ("requeue", "WaitingForRunLease", 30.0)
    assert "cluster c1 holds 2 run slots, its cap" in out["message"]
    assert (
        plan_pass(snapshot.build(machine, [*others, *AT_CAP]), NOW, settings=CAPPED).launch is None
    )


def test_a_suspended_machine_at_its_cap_says_the_cap_as_with_every_slot_held() -> None:
    machine, others = _machine(suspend=True)
    assert _decided(machine, [*others, *AT_CAP])["reason"] == "WaitingForRunLease"
    every = [slot(i, f"x{i}-apply-1", cluster="other") for i in range(10)]
    assert _decided(machine, [*others, *every])["reason"] == "WaitingForRunLease"
    assert _decided(machine, others)["reason"] == "Suspended"


def test_a_cluster_whose_members_hold_its_cap_waits_for_a_run_lease() -> None:
    """Before the family's wait, as every slot held is: WaitingForMachineOperations
    only once the cap leaves it a slot."""
    obj = captf(spec={"variables": {"size": 4}})  # an apply is due
    members = [captf(MACHINE, "m7", status={"activeJob": "m7-apply-1"}), *AT_CAP]
    out = _decided(obj, [*base_objects(), *members])
    assert out["reason"] == "WaitingForRunLease", out
    roomier = Settings(max_runs_per_cluster=3, slot_namespace=HOME)
    assert _decided(obj, [*base_objects(), *members], roomier)["reason"] == (
        "WaitingForMachineOperations"
    )


@pytest.mark.parametrize("namespace", ["default", HOME, "team-a"])
def test_the_cap_counts_the_slots_of_the_controllers_namespace_only(namespace: str) -> None:
    machine, others = _machine()
    held = [slot(0, "m7-apply-1", namespace=namespace), slot(1, "m8-apply-1", namespace=namespace)]
    there = Settings(max_runs_per_cluster=2, slot_namespace=namespace)
    elsewhere = Settings(max_runs_per_cluster=2, slot_namespace="elsewhere")
    assert _decided(machine, [*others, *held], there)["reason"] == "WaitingForRunLease"
    assert _decided(machine, [*others, *held], elsewhere)["action"] == "run"


def test_a_slot_already_held_for_its_next_job_lets_it_go_past_the_cap() -> None:
    """After a crash between the slot's write and the Job's create, the same decision
    finds the slot its own, in the gate as in the hold."""
    machine, others = _machine()
    name = snapshot.build(machine, others).next_job("apply")[0]
    held = [*AT_CAP[:2], slot(2, name)]
    decision = decide(snapshot.build(machine, [*others, *held]), NOW, CAPPED)
    assert isinstance(decision, Run), decision


def test_without_the_cap_nothing_waits_for_it() -> None:
    machine, others = _machine()
    out = _decided(machine, [*others, *AT_CAP], Settings(slot_namespace=HOME))
    assert out["action"] == "run"
