"""The contract inputs of an object, assembled from its snapshot, and the hash over them."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    CLUSTER,
    MACHINE,
    POOL,
    Reason,
    state_secret_name,
)
from controller.core.decide.context import read_spec
from controller.core.decide.contract_inputs import NotYet, Refused, assemble
from controller.core.jobs.sensitive import values
from controller.core.spec.inputs import Inputs, inputs_hash
from controller.core.spec.policy import RunnerPolicy
from runtime.jsonobj import Json
from tests import capi_builders as capi
from tests.builders import (
    MODULE,
    NS,
    ROLE_MODULE,
    VARIABLES,
    base_objects,
    current_hash,
    labelled,
    module_configmap,
    secret,
    state,
)


def _cluster_snap(**cluster: Any) -> Any:
    owner = capi.cluster(**cluster)
    obj = capi.owned(CLUSTER, "c1", owner=owner)
    return capi.snap_of(obj, base_objects("c1", applied=False, module=ROLE_MODULE), [owner])


def _machine_snap(*, bootstrap: Json | None = None, cluster_outputs: Json | None = None) -> Any:
    owner_cluster, owner = capi.cluster(), capi.machine(control_plane=True)
    obj = capi.owned(MACHINE, "tm1", owner=owner)
    others = [module_configmap("tm1", ROLE_MODULE), secret("creds", {"token": "t"})]
    others.append(capi.bootstrap_secret() if bootstrap is None else bootstrap)
    if cluster_outputs is not None:
        others.append(capi.state_with_outputs("c1", cluster_outputs))
    return capi.snap_of(obj, others, [owner_cluster, owner])


def test_a_cluster_gets_the_cluster_inputs_of_its_owner() -> None:
    endpoint = {"host": "10.0.0.1", "port": 6443}
    snap = _cluster_snap(endpoint=endpoint, initialized=True, version="v1.31.0")
    found = assemble(snap, {})
    assert isinstance(found, dict)
    assert found["captf_cluster"] == {"name": "cl", "namespace": "default"}
    assert found["control_plane_endpoint"] == endpoint
    assert found["control_plane_initialized"] is True
    assert found["kubernetes_version"] == "v1.31.0"


def test_control_plane_initialized_is_latched_by_the_last_durable_inputs() -> None:
    snap = _cluster_snap(initialized=False)
    reading = read_spec(snap, RunnerPolicy())
    assert reading.inputs is not None
    assert reading.inputs.contract is not None
    latched = dict(reading.inputs.contract, control_plane_initialized=True)
    durable = secret("c1-inputs-abcdef12", {"contract.json": orjson.dumps(latched).decode()})
    durable = labelled(durable)
    snap = capi.snap_of(
        snap.obj,
        [*base_objects("c1", applied=False, module=ROLE_MODULE), durable],
        [capi.cluster()],
    )
    found = assemble(snap, {})
    assert isinstance(found, dict)
    assert found["control_plane_initialized"] is True


def test_after_a_move_the_latch_reads_the_inputs_the_state_was_applied_with() -> None:
    """`clusterctl move` recreates the durable inputs Secrets within one second: their
    creation times tie, and the state's inputs hash names the one last applied."""
    snap = _cluster_snap(initialized=False)
    reading = read_spec(snap, RunnerPolicy())
    assert reading.inputs is not None
    assert reading.inputs.contract is not None
    moved_at = "2026-01-01T00:00:00Z"
    durable = []
    for name, initialized, digest in (("aaaaaaaa", False, "a" * 64), ("bbbbbbbb", True, "b" * 64)):
        given = dict(reading.inputs.contract, control_plane_initialized=initialized)
        body = {"contract.json": orjson.dumps(given).decode()}
        inputs = labelled(secret(f"c1-inputs-{name}", body, **{ANN_INPUTS_HASH: digest}))
        inputs["metadata"]["creationTimestamp"] = moved_at
        durable.append(inputs)
    snap = capi.snap_of(
        snap.obj,
        [
            *base_objects("c1", applied=False, module=ROLE_MODULE),
            state("c1", serial=4, inputs="b" * 64),
            *durable,
        ],
        [capi.cluster()],
    )
    found = assemble(snap, {})
    assert isinstance(found, dict)
    assert found["control_plane_initialized"] is True


def test_a_machine_gets_bootstrap_data_and_the_cluster_exports() -> None:
    exports = {"vpc": "v-1"}
    snap = _machine_snap(cluster_outputs={"exports": exports})
    found = assemble(snap, {})
    assert isinstance(found, dict)
    assert found["machine_name"] == "m1"
    assert base64.b64decode(found["bootstrap_data"]) == b"#cloud-config\n"
    assert found["bootstrap_format"] == "cloud-config"
    assert found["captf_cluster_outputs"] == exports
    assert found["control_plane"] is True
    assert found["kubernetes_version"] == "v1.31.0"


def test_a_machine_before_its_cluster_state_has_empty_exports() -> None:
    found = assemble(_machine_snap(), {})
    assert isinstance(found, dict)
    assert found["captf_cluster_outputs"] == {}


def test_a_pool_gets_replicas_and_the_cluster_failure_domains() -> None:
    owner_cluster, owner = capi.cluster(), capi.machine_pool(replicas=3)
    obj = capi.owned(POOL, "tp1", owner=owner)
    domains = [{"name": "a"}, {"name": "b"}]
    others = [
        module_configmap("tp1", ROLE_MODULE),
        capi.bootstrap_secret("p1-bootstrap"),
        capi.state_with_outputs("c1", {"failure_domains": domains, "exports": None}),
    ]
    found = assemble(capi.snap_of(obj, others, [owner_cluster, owner]), {})
    assert isinstance(found, dict)
    assert found["replicas"] == 3
    assert found["cluster_failure_domains"] == ["a", "b"]
    assert found["machinepool_name"] == "p1"
    assert found["captf_cluster_outputs"] == {}


def test_without_its_owners_an_object_is_not_yet_an_error() -> None:
    snap = capi.snap_of(
        capi.owned(CLUSTER, "c1", owner=capi.cluster()), base_objects(module=ROLE_MODULE), []
    )
    assert isinstance(assemble(snap, {}), NotYet)
    reading = read_spec(snap, RunnerPolicy())
    assert reading.wait is None
    assert reading.contract_pending is not None
    assert reading.inputs is not None
    assert reading.inputs.contract is None


def test_a_machine_without_bootstrap_data_yet_is_not_yet() -> None:
    owner_cluster, owner = capi.cluster(), capi.machine(data_secret=None)
    obj = capi.owned(MACHINE, "tm1", owner=owner)
    snap = capi.snap_of(obj, [module_configmap("tm1", ROLE_MODULE)], [owner_cluster, owner])
    assert isinstance(assemble(snap, {}), NotYet)


def test_a_bootstrap_secret_without_value_is_refused() -> None:
    snap = _machine_snap(bootstrap=capi.bootstrap_secret(value=None))
    found = assemble(snap, {})
    assert isinstance(found, Refused)
    assert found.reason == Reason.BOOTSTRAP_DATA_INVALID
    wait = read_spec(snap, RunnerPolicy()).wait
    assert wait is not None
    assert wait.reason == Reason.BOOTSTRAP_DATA_INVALID
    assert "m1-bootstrap" in wait.message


def test_a_reserved_user_variable_is_refused_before_anything_runs() -> None:
    owner = capi.cluster()
    obj = capi.owned(CLUSTER, "c1", owner=owner, spec={"variables": {"captf_x": 1, "size": 3}})
    snap = capi.snap_of(obj, base_objects(module=ROLE_MODULE), [owner])
    wait = read_spec(snap, RunnerPolicy()).wait
    assert wait is not None
    assert wait.reason == Reason.VARIABLES_REFUSED
    assert "captf_x" in wait.message
    assert "size" not in wait.message


def test_objects_outside_cluster_api_keep_their_hash() -> None:
    """No contract inputs: the two-key document, so hashes recorded before stay."""
    assert Inputs(MODULE, dict(VARIABLES)).hash == current_hash()
    assert inputs_hash(MODULE, VARIABLES, None) == current_hash()


def test_the_hash_covers_the_contract_inputs_but_no_uid() -> None:
    snap = _cluster_snap()
    inputs = read_spec(snap, RunnerPolicy()).inputs
    assert inputs is not None
    assert inputs.contract is not None
    assert inputs.hash != current_hash()
    assert inputs.hash == inputs_hash(ROLE_MODULE, VARIABLES, inputs.contract)
    moved = capi.owned(CLUSTER, "c1", owner=capi.cluster(), uid="uid-after-move")
    moved_snap = capi.snap_of(
        moved, base_objects("c1", applied=False, module=ROLE_MODULE), [capi.cluster()]
    )
    assert read_spec(moved_snap, RunnerPolicy()).inputs == inputs


def _pool_hash(notes: dict[str, str], *, spec: int, observed: int) -> tuple[int, str]:
    """The rendered replicas and the inputs hash of a pool whose MachinePool says `spec`
    and whose module last observed `observed`."""
    owner = capi.machine_pool(annotations=notes, replicas=spec)
    obj = capi.owned(POOL, "tp1", owner=owner, status={"replicas": observed})
    others = [module_configmap("tp1", ROLE_MODULE), capi.bootstrap_secret("p1-bootstrap")]
    inputs = read_spec(capi.snap_of(obj, others, [capi.cluster(), owner]), RunnerPolicy())
    assert inputs.inputs is not None
    assert inputs.inputs.contract is not None
    return inputs.inputs.contract["replicas"], inputs.inputs.hash


BOUNDS = {
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
}


def test_a_pool_whose_cloud_sizes_its_group_hashes_without_replicas() -> None:
    notes = BOUNDS | {"cluster.x-k8s.io/replicas-managed-by": "cloud"}
    found = [_pool_hash(notes, spec=2, observed=observed) for observed in (2, 4)]
    assert [replicas for replicas, _ in found] == [2, 4]
    assert found[0][1] == found[1][1]


def test_a_pool_the_cluster_autoscaler_scales_applies_its_spec_replicas() -> None:
    """Issue 37: the autoscaler's annotations alone; its /scale from 2 to 4 changes
    spec.replicas, which is rendered and hashed: an apply. What the module last observed
    (2) does not hold it back."""
    before = _pool_hash(BOUNDS, spec=2, observed=2)
    after = _pool_hash(BOUNDS, spec=4, observed=2)
    assert (before[0], after[0]) == (2, 4)
    assert before[1] != after[1]


def test_the_durable_secret_holds_contract_json_and_its_payload_is_redacted() -> None:
    inputs = read_spec(_machine_snap(), RunnerPolicy()).inputs
    assert inputs is not None
    assert inputs.contract is not None
    data = inputs.secret_data()
    assert orjson.loads(data["contract.json"]) == inputs.contract
    assert inputs.contract["bootstrap_data"] in values(inputs.carried(), [], None)


def test_a_machine_once_applied_keeps_the_inputs_it_was_applied_with() -> None:
    snap = _machine_snap()
    applied = read_spec(snap, RunnerPolicy()).inputs
    assert applied is not None
    assert applied.contract is not None
    durable = secret(
        f"tm1-inputs-{applied.hash8}",
        {k: v.decode() for k, v in applied.secret_data().items()},
        **{"captf.io/inputs-hash": applied.hash},
    )
    durable = labelled(durable, "tm1")
    named = state_secret_name(NS, MACHINE, "tm1")
    state = labelled(secret(named, {}, **{"captf.io/inputs-hash": applied.hash}), "tm1")
    # The Machine and its bootstrap Secret are gone (a deletion): the inputs stay.
    gone = capi.snap_of(
        snap.obj, [module_configmap("tm1", ROLE_MODULE), durable, state], [capi.cluster()]
    )
    reading = read_spec(gone, RunnerPolicy())
    assert reading.inputs is not None
    assert reading.inputs.hash == applied.hash
    assert reading.contract_pending is None


# Issue 26, item 4: the docs disagreed. The durable inputs stand in for the contract
# inputs (the Cluster API objects), not for the module: a module ConfigMap that is gone
# is DurableInputsMissing, for an applied machine too, a deletion included.
def test_an_applied_machine_whose_module_configmap_is_gone_waits_durable_inputs_missing() -> None:
    snap = _machine_snap()
    applied = read_spec(snap, RunnerPolicy()).inputs
    assert applied is not None
    durable = secret(
        f"tm1-inputs-{applied.hash8}",
        {k: v.decode() for k, v in applied.secret_data().items()},
        **{"captf.io/inputs-hash": applied.hash},
    )
    state = secret("tm1-state", {}, **{"captf.io/inputs-hash": applied.hash})
    for obj in (
        snap.obj,
        snap.obj
        | {"metadata": snap.obj["metadata"] | {"deletionTimestamp": "2026-06-01T11:00:00Z"}},
    ):
        gone = capi.snap_of(
            obj, [durable, state, secret("creds", {"token": "t"})], [capi.cluster()]
        )
        reading = read_spec(gone, RunnerPolicy())
        assert reading.wait is not None
        assert reading.wait.reason == Reason.DURABLE_INPUTS_MISSING
        assert reading.wait.message == "module ConfigMap tm1-module not found"
