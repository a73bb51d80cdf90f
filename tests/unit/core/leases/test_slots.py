"""Run slots and the per-cluster cap (controller/core/leases/slots.py): with the cap, one
cluster's Jobs never hold more than it, and a Job waits only while every slot is held or
its own cluster holds its cap (the slots stay in use: no slot idles while a Job that may
take it waits). Slots are taken with the launcher's own write (writes.change_of), so
what the cap counts is what a claim writes."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core import plan_pass
from controller.core.basics.names import CLUSTER, MACHINE, Reason
from controller.core.decide import snapshot
from controller.core.decide.claims import LEASE_WAIT
from controller.core.decide.decision import to_json
from controller.core.decide.settings import Settings
from controller.core.decide.steps import decide
from controller.core.leases.family import Busy, holder_of
from controller.core.leases.slots import cluster_full, free_slot, holder_cluster
from controller.core.leases.writes import LeaseWrite, Role, change_of
from controller.core.plan.launching import Launch
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


@dataclass
class Slots:
    """The controller's slot Leases, claimed and freed as the launcher and accountant do."""

    count: int
    cap: int
    leases: dict[str, Json] = field(default_factory=dict)

    def waits(self, job: str, cluster: tuple[str, str]) -> bool:
        leases = list(self.leases.values())
        full = cluster_full(
            leases, job=job, own_jobs=(), namespace=HOME, cluster=cluster, cap=self.cap
        )
        return full is not None or self._free(job) is None

    def take(self, job: str, cluster: tuple[str, str]) -> None:
        slot = self._free(job)
        assert slot is not None
        write = LeaseWrite(HOME, slot, job, Role.RUN_SLOT, cluster[1], holder_namespace=cluster[0])
        taken = change_of(write, self.leases.get(slot), NOW)
        assert taken is not None
        assert not isinstance(taken, Busy)
        self.leases[slot] = taken

    def free(self, job: str) -> None:
        for name, lease in self.leases.items():
            if holder_of(lease) == job:
                self.leases[name] = lease | {"spec": {}}

    def held_by(self, cluster: tuple[str, str]) -> int:
        return sum(
            1
            for lease in self.leases.values()
            if holder_of(lease) and holder_cluster(lease) == cluster
        )

    def held(self) -> int:
        return sum(1 for lease in self.leases.values() if holder_of(lease))

    def _free(self, job: str) -> str | None:
        leases = list(self.leases.values())
        return free_slot(leases, job=job, own_jobs=(), namespace=HOME, count=self.count)


CLUSTERS = [("ns-a", "big"), ("ns-b", "small"), ("ns-c", "small"), ("ns-a", "")]
# An event: a Job of cluster i arrives, or the oldest running Job of cluster i ends.
EVENTS = st.lists(st.tuples(st.booleans(), st.integers(0, len(CLUSTERS) - 1)), max_size=80)


@settings(max_examples=200, deadline=None)
@given(count=st.integers(1, 8), cap=st.integers(0, 8), events=EVENTS)
def test_a_cluster_holds_at_most_its_cap_and_no_slot_idles_while_a_job_may_take_it(
    count: int, cap: int, events: list[tuple[bool, int]]
) -> None:
    slots = Slots(count, cap)
    waiting: list[tuple[str, tuple[str, str]]] = []
    running: list[tuple[str, tuple[str, str]]] = []
    for n, (arrives, which) in enumerate(events):
        cluster = CLUSTERS[which]
        if arrives:
            waiting.append((f"job-{n}", cluster))
        else:
            ended = next((r for r in running if r[1] == cluster), None)
            if ended is not None:
                running.remove(ended)
                slots.free(ended[0])
        for job, of in list(waiting):  # in arrival order, as the queue retries them
            if not slots.waits(job, of):
                slots.take(job, of)
                waiting.remove((job, of))
                running.append((job, of))
        assert slots.held() == len(running) <= count
        for job, of in waiting:
            if cap and of[1]:
                assert slots.held_by(of) <= cap
                assert slots.held() == count or slots.held_by(of) == cap, job
            else:
                assert slots.held() == count, job


def test_without_a_cap_one_cluster_takes_every_slot_and_with_it_another_cluster_still_runs() -> (
    None
):
    for cap, small_runs in ((0, False), (3, True)):
        slots = Slots(count=5, cap=cap)
        for i in range(20):
            if not slots.waits(f"big-{i}", ("ns-a", "big")):
                slots.take(f"big-{i}", ("ns-a", "big"))
        assert (not slots.waits("small-0", ("ns-b", "small"))) is small_runs


def slot(i: int, holder: str, cluster: str) -> Json:
    notes = {"captf.io/holder-namespace": NS, "captf.io/holder-cluster": cluster}
    meta = {"name": f"captf-run-slot-{i}", "namespace": NS, "annotations": notes}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {"holderIdentity": holder},
    }


def test_the_decision_waits_for_the_clusters_cap_and_another_cluster_runs() -> None:
    """What `captf decide` prints with --max-concurrent-runs-per-cluster 2: a machine of
    the cluster whose Jobs hold two slots waits WaitingForRunLease; one of another runs."""
    capped = Settings(max_runs_per_cluster=2)
    held = [slot(0, "c1-m7-apply-1", "c1"), slot(1, "c1-m8-apply-1", "c1")]
    for cluster, expected in (("c1", "requeue"), ("c2", "run")):
        machine = captf(MACHINE, "m1", cluster=cluster)
        infra = captf(name=cluster, ready=True, cluster=cluster)
        others = [
            module_configmap("m1"),
            secret("creds", {"t": "x"}),
            infra,
            *owners_of(machine, cluster=capi_cluster(cluster)),
        ]
        others += held
        decision = to_json(decide(snapshot.build(machine, others), NOW, capped))
        assert decision["action"] == expected, decision
        if expected == "requeue":
            assert decision["reason"] == "WaitingForRunLease"
        else:  # the slot it claims names its cluster, for the next Job's count
            launch = plan_pass(snapshot.build(machine, others), NOW, settings=capped).launch
            assert launch is not None
            assert (launch.claims[0].role, launch.claims[0].cluster) == (Role.RUN_SLOT, cluster)
    uncapped = to_json(decide(snapshot.build(captf(CLUSTER), [*base_objects(), *held]), NOW))
    assert uncapped["action"] != "requeue" or uncapped["reason"] != "WaitingForRunLease"


def test_a_run_slot_taken_meanwhile_is_tried_again_at_once_an_operation_lease_waits() -> None:
    """Objects launching together pick the same first free slot; the losers try again on
    a fresher cache (rate-limited) instead of waiting LEASE_WAIT with slots free."""
    start = Launch({"metadata": {"name": "m1-apply-1"}}, None, ())
    assert start.wait_if_busy(Reason.WAITING_FOR_RUN_LEASE) is None
    assert start.wait_if_busy(Reason.WAITING_FOR_CLUSTER_OPERATION) == LEASE_WAIT
