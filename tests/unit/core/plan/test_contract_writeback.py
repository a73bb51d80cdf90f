"""The contract written back: planned from the state's outputs.json and the spec."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.core.basics.names import CLUSTER, MACHINE, POOL
from controller.core.decide import snapshot
from controller.core.decide.context import read_spec
from controller.core.plan.planner import Plan, plan_pass
from controller.core.spec.policy import RunnerPolicy
from runtime.jsonobj import Json
from tests import capi_builders as capi
from tests.builders import NOW, ROLE_MODULE, base_objects, captf, job, module_configmap, secret

HEALTHY = {"state": "running", "healthy": True}


def _applied(snap: Any, outputs: Json, name: str) -> Any:
    """The snapshot with a state applied at the current inputs, holding `outputs`."""
    inputs = read_spec(snap, RunnerPolicy()).inputs
    assert inputs is not None
    assert inputs.contract is not None
    state = capi.state_with_outputs(name, outputs, inputs_hash=inputs.hash, kind=snap.kind)
    return replace(snap, secrets={**snap.secrets, state["metadata"]["name"]: state})


def machine_plan(outputs: Json, **obj: Any) -> Plan:
    owner_cluster, owner = capi.cluster(), capi.machine()
    tm = capi.owned(MACHINE, "tm1", owner=owner, **obj)
    others = [
        module_configmap("tm1", ROLE_MODULE),
        secret("creds", {"token": "t"}),
        capi.bootstrap_secret(),
    ]
    snap = _applied(capi.snap_of(tm, others, [owner_cluster, owner]), outputs, "tm1")
    return plan_pass(snap, NOW)


def conditions(todo: Plan) -> dict[str, Json]:
    assert todo.status is not None
    return {c["type"]: c for c in todo.status["conditions"]}


MACHINE_OUT = {
    "provider_id": "captf://cl/m1",
    "addresses": [
        {"type": "Hostname", "address": "m1"},
        {"type": "InternalIP", "address": "10.0.0.2"},
    ],
    "failure_domain": None,
    "interruptible": None,
    "health": HEALTHY,
}


def test_a_machine_writes_its_provider_id_once_and_reports_provisioned() -> None:
    todo = machine_plan(MACHINE_OUT)
    assert todo.spec_patch == {"spec": {"providerID": "captf://cl/m1"}}
    assert todo.status is not None
    assert todo.status["initialization"] == {"provisioned": True}
    assert todo.status["addresses"][0] == {"type": "InternalIP", "address": "10.0.0.2"}
    assert todo.status["interruptible"] is False
    found = conditions(todo)
    assert found["Ready"]["status"] == "True"
    assert found["InfrastructureHealthy"]["reason"] == "Healthy"
    assert found["OutputsValid"]["status"] == "True"


def test_a_written_provider_id_is_not_written_again() -> None:
    todo = machine_plan(MACHINE_OUT, spec={"providerID": "captf://cl/m1"})
    assert todo.spec_patch is None


def test_a_changed_provider_id_is_a_condition_not_an_overwrite() -> None:
    todo = machine_plan(MACHINE_OUT, spec={"providerID": "captf://cl/other"})
    assert todo.spec_patch is None
    assert conditions(todo)["OutputsValid"]["reason"] == "ProviderIDChanged"


def test_provisioned_is_latched() -> None:
    pending = dict(MACHINE_OUT, health={"state": "pending"})
    assert machine_plan(pending).status["initialization"] == {"provisioned": False}  # type: ignore[index]
    latched = machine_plan(pending, status={"initialization": {"provisioned": True}})
    assert latched.status is None or "initialization" not in latched.status
    assert conditions_or_none(latched) != "True"


def conditions_or_none(todo: Plan) -> str | None:
    if todo.status is None or "conditions" not in todo.status:
        return None
    found = {c["type"]: c for c in todo.status["conditions"]}.get("Ready", {}).get("status")
    return None if found is None else str(found)


def test_an_invalid_output_writes_nothing() -> None:
    todo = machine_plan(dict(MACHINE_OUT, provider_id=7))
    assert todo.spec_patch is None
    assert todo.status is not None
    assert "addresses" not in todo.status
    found = conditions(todo)["OutputsValid"]
    assert (found["status"], found["reason"]) == ("False", "OutputsInvalid")
    assert "provider_id" in found["message"]


def test_a_missing_output_named_by_the_failed_apply_is_outputs_missing() -> None:
    owner_cluster, owner = capi.cluster(), capi.machine()
    tm = capi.owned(MACHINE, "tm1", owner=owner)
    others = [
        module_configmap("tm1", ROLE_MODULE),
        secret("creds", {"token": "t"}),
        capi.bootstrap_secret(),
    ]
    snap = capi.snap_of(tm, others, [owner_cluster, owner])
    inputs = read_spec(snap, RunnerPolicy()).inputs
    assert inputs is not None
    error = {"kind": "outputs-missing", "outputs": ["provider_id"]}
    failed = job(
        "apply",
        1,
        "failed",
        owner="tm1",
        kind=MACHINE,
        result={"message": "x", "error": error},
        annotations={"captf.io/inputs-hash": inputs.hash},
    )
    snap = capi.snap_of(tm, [*others, failed], [owner_cluster, owner])
    found = conditions(plan_pass(snap, NOW))["OutputsValid"]
    assert (found["status"], found["reason"]) == ("False", "OutputsMissing")
    assert "provider_id" in found["message"]


def cluster_plan(outputs: Json, **cluster: Any) -> Plan:
    owner = capi.cluster(**cluster)
    tc = capi.owned(CLUSTER, "c1", owner=owner)
    others = [module_configmap("c1", ROLE_MODULE), secret("creds", {"token": "t"})]
    return plan_pass(_applied(capi.snap_of(tc, others, [owner]), outputs, "c1"), NOW)


CLUSTER_OUT = {
    "control_plane_endpoint": {"host": "127.0.0.1", "port": 6443},
    "failure_domains": [{"name": "a", "attributes": {"zone": "z1"}}],
    "exports": {},
    "health": HEALTHY,
}


def test_a_cluster_writes_the_modules_endpoint_once_and_its_failure_domains() -> None:
    todo = cluster_plan(CLUSTER_OUT)
    assert todo.spec_patch == {
        "spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}},
        "metadata": {"annotations": {"captf.io/endpoint-source": "module"}},
    }
    assert todo.status is not None
    assert todo.status["failureDomains"] == [
        {"name": "a", "controlPlane": True, "attributes": {"zone": "z1"}}
    ]
    assert conditions(todo)["Ready"]["status"] == "True"


def test_a_cluster_given_an_endpoint_keeps_it() -> None:
    todo = cluster_plan(CLUSTER_OUT, endpoint={"host": "10.1.1.1", "port": 443})
    assert todo.spec_patch is None


def test_a_pool_writes_its_provider_id_list_replicas_and_ready() -> None:
    owner_cluster, owner = capi.cluster(), capi.machine_pool()
    tp = capi.owned(POOL, "tp1", owner=owner)
    others = [
        module_configmap("tp1", ROLE_MODULE),
        secret("creds", {"token": "t"}),
        capi.bootstrap_secret("p1-bootstrap"),
    ]
    outputs = {
        "provider_id": None,
        "provider_id_list": ["captf://b", "captf://a", "captf://a"],
        "replicas": 2,
        "instances": [],
        "health": HEALTHY,
    }
    todo = plan_pass(
        _applied(capi.snap_of(tp, others, [owner_cluster, owner]), outputs, "tp1"), NOW
    )
    assert todo.spec_patch == {"spec": {"providerIDList": ["captf://a", "captf://b"]}}
    assert todo.status is not None
    assert todo.status["replicas"] == 2
    assert todo.status["ready"] is True
    assert todo.status["initialization"] == {"provisioned": True}


def test_objects_outside_cluster_api_get_no_write_back() -> None:
    todo = plan_pass(snapshot.build(captf(), base_objects()), NOW)
    assert todo.spec_patch is None
    assert "OutputsValid" not in {c["type"] for c in (todo.status or {}).get("conditions", [])}


def _pool_plan(outputs: Json, annotations: dict[str, str] | None = None) -> Plan:
    owner_cluster, owner = capi.cluster(), capi.machine_pool(annotations=annotations)
    tp = capi.owned(POOL, "tp1", owner=owner)
    others = [
        module_configmap("tp1", ROLE_MODULE),
        secret("creds", {"token": "t"}),
        capi.bootstrap_secret("p1-bootstrap"),
    ]
    return plan_pass(
        _applied(capi.snap_of(tp, others, [owner_cluster, owner]), outputs, "tp1"), NOW
    )


POOL_OUT = {
    "provider_id": None,
    "provider_id_list": ["captf://a"],
    "replicas": 1,
    "instances": [
        {
            "provider_id": "captf://a",
            "instance_id": "i-a",
            "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}],
            "failure_domain": "z1",
            "state": "running",
        }
    ],
    "health": HEALTHY,
}


def test_a_pool_shows_its_instances_and_whether_autoscaling_is_active() -> None:
    """Issue 30: status.instances from the module's `instances` (bounded by
    INSTANCES_MAX), and AutoscalingActive from the MachinePool's autoscaler annotations."""
    todo = _pool_plan(POOL_OUT)
    assert todo.status is not None
    assert todo.status["instances"] == [
        {
            "providerID": "captf://a",
            "instanceID": "i-a",
            "failureDomain": "z1",
            "state": "running",
            "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}],
        }
    ]
    assert conditions(todo)["AutoscalingActive"]["status"] == "False"
    assert conditions(todo)["AutoscalingActive"]["reason"] == "AutoscalingDisabled"
    bounds = {
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
    }
    bounded = conditions(_pool_plan(POOL_OUT, bounds))["AutoscalingActive"]
    assert (bounded["status"], bounded["reason"]) == ("False", "ReplicasFromSpec")
    assert "[1, 5]" in bounded["message"]
    managed = bounds | {"cluster.x-k8s.io/replicas-managed-by": "cloud"}
    active = conditions(_pool_plan(POOL_OUT, managed))["AutoscalingActive"]
    assert (active["status"], active["reason"]) == ("True", "AutoscalingActive")
    assert "between 1 and 5" in active["message"]


BOUNDS = {
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
}
MANAGED = "cluster.x-k8s.io/replicas-managed-by"


def _sized(
    annotations: dict[str, str], replicas: int | None = 2, writers: list[str] | None = None
) -> Json | None:
    """The patch of the pool's MachinePool (at `replicas`, resourceVersion 41) when the
    module observed 4; `writers` the managers of the annotation, by managedFields."""
    owner_cluster = capi.cluster()
    owner = capi.machine_pool(annotations=annotations, replicas=replicas)
    owner["metadata"]["resourceVersion"] = "41"
    if writers is not None:
        owned = [(manager, "Update") for manager in writers]
        owner["metadata"]["managedFields"] = capi.annotation_writers(MANAGED, owned)
    tp = capi.owned(POOL, "tp1", owner=owner)
    others = [
        module_configmap("tp1", ROLE_MODULE),
        secret("creds", {"token": "t"}),
        capi.bootstrap_secret("p1-bootstrap"),
    ]
    out = POOL_OUT | {"replicas": 4}
    todo = plan_pass(_applied(capi.snap_of(tp, others, [owner_cluster, owner]), out, "tp1"), NOW)
    return None if todo.pool_patch is None else todo.pool_patch.patch


WRITTEN = {"metadata": {"resourceVersion": "41"}, "spec": {"replicas": 4}}
WITHDRAWN = {"metadata": {"annotations": {MANAGED: None}, "resourceVersion": "41"}}


@pytest.mark.parametrize(
    ("annotations", "replicas", "writers", "patch"),
    [
        # Issue 37: the autoscaler's annotations alone leave spec.replicas the size (its
        # /scale holds): nothing is written, and never a claim.
        (BOUNDS, 2, None, None),
        ({}, 2, None, None),
        # The user's replicas-managed-by, any value: the cloud's size is written back,
        # only spec.replicas.
        (BOUNDS | {MANAGED: "cloud"}, 2, None, WRITTEN),
        (BOUNDS | {MANAGED: "captf"}, 2, None, WRITTEN),  # no sign it is ours: the user's
        (BOUNDS | {MANAGED: "captf"}, 2, ["kubectl"], WRITTEN),
        (BOUNDS | {MANAGED: "cloud"}, 4, None, None),  # already so
        (BOUNDS | {MANAGED: "false"}, 2, None, None),
        ({MANAGED: "cloud"}, 2, None, None),  # no bounds: spec.replicas is the size
        # CAPTF's own old claim, by who wrote it: withdrawn, with or without the bounds.
        (BOUNDS | {MANAGED: "captf"}, 2, ["Python"], WITHDRAWN),
        (BOUNDS | {MANAGED: "captf"}, 4, ["Python"], WITHDRAWN),
        ({MANAGED: "captf"}, 2, ["Python"], WITHDRAWN),
    ],
)
def test_the_machine_pool_is_written_only_when_the_cloud_sizes_its_group(
    annotations: dict[str, str], replicas: int, writers: list[str] | None, patch: Json | None
) -> None:
    """The module observed 4; every patch is guarded by the resourceVersion read."""
    assert _sized(annotations, replicas, writers) == patch
