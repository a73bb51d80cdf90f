"""A Cluster API object's change wakes the CAPTF objects that act for it only when a pass
reads what changed: its metadata, its spec, its status's `initialization`. Cluster API's
own status writes (conditions, counters, phase) wake nobody (issue 31: every Machine's
progress woke every member of its Cluster)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.core.basics.names import (
    CAPI_API_VERSION,
    CAPI_CLUSTER,
    CAPI_MACHINE,
    CLUSTER,
    LABEL_CLUSTER_NAME,
    MACHINE,
)
from controller.io.caches import Caches
from controller.io.informers import capi_fields
from runtime.jsonobj import Json
from tests.unit.io.cache_objects import NS, captf, deliver, meta

CONDITIONS = [{"type": "Available", "status": "False", "reason": "Scaling"}]


def _capi(kind: str, name: str, spec: Json, status: Json, rv: int = 1) -> Json:
    return {
        "apiVersion": CAPI_API_VERSION,
        "kind": kind,
        "metadata": meta(name, rv, labels={LABEL_CLUSTER_NAME: "c"}),
        "spec": spec,
        "status": status,
    }


def machine(rv: int = 1, **changes: Any) -> Json:
    ref = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": MACHINE, "name": "tm"}
    spec = {"clusterName": "c", "infrastructureRef": ref, "bootstrap": {"dataSecretName": "b"}}
    obj = _capi(CAPI_MACHINE, "m", spec, {"phase": "Provisioning", "conditions": CONDITIONS}, rv)
    for path, value in changes.items():
        target = obj
        *parents, last = path.split("__")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return obj


def cluster(rv: int = 1, **status: Any) -> Json:
    ref = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": CLUSTER, "name": "tc"}
    base = {"initialization": {"infrastructureProvisioned": True}, "conditions": CONDITIONS}
    return _capi(CAPI_CLUSTER, "c", {"infrastructureRef": ref}, base | status, rv)


@pytest.fixture
def members(caches: Caches) -> None:
    owner = [{"apiVersion": CAPI_API_VERSION, "kind": CAPI_MACHINE, "name": "m", "uid": "u"}]
    adopted = [{"apiVersion": CAPI_API_VERSION, "kind": CAPI_CLUSTER, "name": "c", "uid": "c"}]
    caches.objects[CLUSTER].store.upsert(captf(CLUSTER, "tc", ownerReferences=adopted))
    member = captf(MACHINE, "tm", labels={LABEL_CLUSTER_NAME: "c"}, ownerReferences=owner)
    caches.objects[MACHINE].store.upsert(member)


def _deliver(caches: Caches, kind: str, obj: Json, event: str = "MODIFIED") -> None:
    """As the informer stores it: through its transform."""
    deliver(caches.capi[kind], event, capi_fields(copy.deepcopy(obj), kind))


@pytest.mark.usefixtures("members")
@pytest.mark.parametrize(
    ("changes", "wakes"),
    [
        ({"status__phase": "Running"}, False),
        ({"status__conditions": [{"type": "Ready", "status": "True"}]}, False),
        ({"status__nodeRef": {"name": "node-1"}}, False),
        ({"status__deletion": {"nodeDrainStartTime": "2026-01-01T00:00:00Z"}}, False),
        ({"metadata__finalizers": ["machine.cluster.x-k8s.io"]}, False),
        ({"spec__providerID": "aws:///i-1"}, False),
        ({"spec__version": "v1.34.0"}, True),
        ({"spec__bootstrap": {"dataSecretName": "b2"}}, True),
        ({"metadata__annotations": {"cluster.x-k8s.io/remediate-machine": ""}}, True),
        ({"metadata__deletionTimestamp": "2026-01-01T00:00:00Z"}, False),
    ],
)
def test_a_machine_wakes_its_infrastructure_only_when_a_pass_reads_the_change(
    caches: Caches, woken: list[str], changes: dict[str, Any], wakes: bool
) -> None:
    _deliver(caches, CAPI_MACHINE, machine(), "ADDED")
    assert woken == [f"{MACHINE}/{NS}/tm"]
    _deliver(caches, CAPI_MACHINE, machine(2, **changes))
    assert woken == [f"{MACHINE}/{NS}/tm"] * (2 if wakes else 1)


@pytest.mark.usefixtures("members")
def test_a_clusters_counters_wake_no_member_and_its_initialization_wakes_them_all(
    caches: Caches, woken: list[str]
) -> None:
    _deliver(caches, CAPI_CLUSTER, cluster(), "ADDED")
    every = sorted([f"{CLUSTER}/{NS}/tc", f"{MACHINE}/{NS}/tm"])
    assert sorted(woken) == every
    woken.clear()
    counters = {"workers": {"desiredReplicas": 3, "readyReplicas": 1}, "phase": "Provisioned"}
    _deliver(caches, CAPI_CLUSTER, cluster(2, **counters))
    assert woken == []
    initialized = {
        "initialization": {"infrastructureProvisioned": True, "controlPlaneInitialized": True}
    }
    _deliver(caches, CAPI_CLUSTER, cluster(3, **counters, **initialized))
    assert sorted(woken) == every


@pytest.mark.usefixtures("members")
def test_a_machines_deletion_wakes_its_infrastructure(caches: Caches, woken: list[str]) -> None:
    _deliver(caches, CAPI_MACHINE, machine(), "ADDED")
    deliver(caches.capi[CAPI_MACHINE], "DELETED", capi_fields(machine(2), CAPI_MACHINE))
    assert woken == [f"{MACHINE}/{NS}/tm"] * 2


def test_a_machine_wakes_no_object_it_names_but_does_not_own(
    caches: Caches, woken: list[str]
) -> None:
    """Not adopted yet: its pass reads no owner; the owner reference, once set, wakes it."""
    caches.objects[MACHINE].store.upsert(captf(MACHINE, "tm"))
    _deliver(caches, CAPI_MACHINE, machine(), "ADDED")
    _deliver(caches, CAPI_MACHINE, machine(2, spec__version="v1.34.0"))
    assert woken == []
