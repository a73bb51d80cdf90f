"""The contract inputs computed from the Cluster API objects."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.contract import inputs, sizing, sources
from controller.core.contract.roles import Role, contract_of
from controller.core.contract.sources import BootstrapDataInvalid, bootstrap_of
from runtime.jsonobj import Json
from tests.unit.core.contract.objects import (
    bootstrap_secret,
    cluster,
    terraform_object,
)


def test_common_inputs_carry_kind_name_and_namespace_only() -> None:
    obj = terraform_object("prod-infra", labels={"a": "b"}, annotations={"x": "y"})
    got = inputs.common_inputs(role=Role.CLUSTER, obj=obj, cluster=cluster("prod"))
    assert got == {
        "captf_contract": "v1alpha1",
        "captf_cluster": {"name": "prod", "namespace": "team-a"},
        "captf_object": {"kind": "TerraformCluster", "name": "prod-infra", "namespace": "team-a"},
        "captf_tags": {
            "captf.io/cluster": "prod",
            "captf.io/namespace": "team-a",
            "captf.io/kind": "TerraformCluster",
            "captf.io/name": "prod-infra",
            "captf.io/managed-by": "captf",
            "captf.io/template": "",
        },
    }


def test_the_template_tag_is_the_cloned_from_name() -> None:
    obj = terraform_object("m-1", annotations={"cluster.x-k8s.io/cloned-from-name": "workers"})
    got = inputs.tags(role=Role.MACHINE, obj=obj, cluster_name="prod")
    assert got["captf.io/template"] == "workers"
    assert got["captf.io/kind"] == "TerraformMachine"


def _moved(obj: Json) -> Json:
    """The same object after clusterctl move and a metadata edit."""
    moved = copy.deepcopy(obj)
    moved["metadata"] |= {"uid": "u-new", "generation": 9, "resourceVersion": "77"}
    moved["metadata"]["labels"] = {"edited": "yes"}
    moved["metadata"].setdefault("annotations", {})["clusterctl.cluster.x-k8s.io/block-move"] = ""
    return moved


def test_a_moved_or_relabelled_object_renders_the_same_inputs() -> None:
    obj, owner = terraform_object("prod"), cluster("prod")
    machine = {"metadata": {"name": "m", "namespace": "team-a", "uid": "1"}, "spec": {}}
    boot = bootstrap_of(bootstrap_secret())
    before = inputs.machine_inputs(
        obj=obj, machine=machine, cluster=owner, bootstrap=boot, exports=None
    )
    after = inputs.machine_inputs(
        obj=_moved(obj),
        machine=_moved(machine),
        cluster=_moved(owner),
        bootstrap=boot,
        exports=None,
    )
    assert before == after
    assert "u-obj" not in repr(before)


# --- cluster -------------------------------------------------------------------------

ENDPOINT = {"host": "api.example.com", "port": 6443}


@pytest.mark.parametrize(
    ("cluster_endpoint", "own_endpoint", "source", "expected"),
    [
        (ENDPOINT, None, None, ENDPOINT),
        (None, ENDPOINT, None, ENDPOINT),
        ({"host": "", "port": 0}, ENDPOINT, None, ENDPOINT),
        ({"host": "half.example.com"}, None, None, None),
        (None, None, None, None),
        (ENDPOINT, ENDPOINT, "module", None),
        (ENDPOINT, None, "user", ENDPOINT),
    ],
)
def test_the_endpoint_input(
    cluster_endpoint: Json | None, own_endpoint: Json | None, source: str | None, expected: Any
) -> None:
    owner = cluster(
        "prod", **({"controlPlaneEndpoint": cluster_endpoint} if cluster_endpoint else {})
    )
    obj = terraform_object("prod")
    if own_endpoint:
        obj["spec"]["controlPlaneEndpoint"] = own_endpoint
    if source:
        obj["metadata"]["annotations"] = {"captf.io/endpoint-source": source}
    assert inputs.control_plane_endpoint(obj=obj, cluster=owner) == expected


def test_cluster_inputs_from_a_topology_cluster() -> None:
    owner = cluster(
        "prod",
        topology={"version": "v1.33.1", "classRef": {"name": "c"}},
        clusterNetwork={
            "pods": {"cidrBlocks": ["192.168.0.0/16"]},
            "services": {"cidrBlocks": ["10.96.0.0/12"]},
            "serviceDomain": "cluster.local",
            "apiServerPort": 6443,
        },
    )
    owner["status"] = {"initialization": {"controlPlaneInitialized": True}}
    got = inputs.cluster_inputs(obj=terraform_object("prod"), cluster=owner, previous=None)
    assert set(got) == contract_of(Role.CLUSTER).input_names
    assert got["kubernetes_version"] == "v1.33.1"
    assert got["control_plane_initialized"] is True
    assert got["cluster_network"] == {
        "pods": ["192.168.0.0/16"],
        "services": ["10.96.0.0/12"],
        "service_domain": "cluster.local",
        "api_server_port": 6443,
    }


def test_cluster_inputs_without_topology_or_network_are_null() -> None:
    got = inputs.cluster_inputs(obj=terraform_object("p"), cluster=cluster("p"), previous=None)
    assert got["kubernetes_version"] is None
    assert got["cluster_network"] is None
    assert got["control_plane_endpoint"] is None
    assert got["control_plane_initialized"] is False


def test_a_partial_network_renders_every_attribute() -> None:
    owner = cluster("p", clusterNetwork={"serviceDomain": "corp.local"})
    assert sources.cluster_network_of(owner) == {
        "pods": [],
        "services": [],
        "service_domain": "corp.local",
        "api_server_port": None,
    }


@pytest.mark.parametrize(
    ("on_cluster", "previous", "expected"),
    [
        (None, None, False),
        (False, None, False),
        (True, None, True),
        (None, {"control_plane_initialized": True}, True),
        (False, {"control_plane_initialized": True}, True),
        (None, {"control_plane_initialized": False}, False),
        (None, {}, False),
    ],
)
def test_control_plane_initialized_is_latched(
    on_cluster: bool | None, previous: Json | None, expected: bool
) -> None:
    owner = cluster("p")
    if on_cluster is not None:
        owner["status"] = {"initialization": {"controlPlaneInitialized": on_cluster}}
    got = inputs.cluster_inputs(obj=terraform_object("p"), cluster=owner, previous=previous)
    assert got["control_plane_initialized"] is expected


# --- bootstrap -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload", [b"#cloud-config\nruncmd: []\n", b"\x1f\x8b\x08\x00binary-gzip\xff", b""]
)
def test_bootstrap_data_is_padded_base64_of_the_raw_value(payload: bytes) -> None:
    got = bootstrap_of(bootstrap_secret(payload))
    assert got.data == base64.b64encode(payload).decode()
    assert base64.b64decode(got.data, validate=True) == payload


@pytest.mark.parametrize(
    ("fmt", "expected"), [(None, "cloud-config"), ("ignition", "ignition"), ("", "cloud-config")]
)
def test_bootstrap_format(fmt: str | None, expected: str) -> None:
    assert bootstrap_of(bootstrap_secret(fmt=fmt)).format == expected


def test_a_bootstrap_secret_without_value_is_refused_by_name() -> None:
    with pytest.raises(BootstrapDataInvalid, match="prod-md-0-boot has no key 'value'"):
        bootstrap_of(bootstrap_secret(value=None, fmt="cloud-config"))


def test_a_bootstrap_value_that_is_not_base64_is_refused() -> None:
    secret = bootstrap_secret()
    secret["data"]["value"] = "not base64!"
    with pytest.raises(BootstrapDataInvalid, match="not base64"):
        bootstrap_of(secret)


# --- machine -------------------------------------------------------------------------


def _machine(**spec: Any) -> Json:
    return {
        "metadata": {"name": "prod-md-0-xyz", "namespace": "team-a", "labels": {}},
        "spec": spec,
    }


def test_machine_inputs() -> None:
    machine = _machine(failureDomain="zone-b", version="v1.31.4+rke2r1")
    got = inputs.machine_inputs(
        obj=terraform_object("prod-md-0-abc"),
        machine=machine,
        cluster=cluster("prod"),
        bootstrap=bootstrap_of(bootstrap_secret(b"hello", "ignition")),
        exports={"network_id": "net-1"},
    )
    assert set(got) == contract_of(Role.MACHINE).input_names
    assert got["machine_name"] == "prod-md-0-xyz"
    assert got["captf_object"]["name"] == "prod-md-0-abc"
    assert got["bootstrap_data"] == "aGVsbG8="
    assert got["bootstrap_format"] == "ignition"
    assert got["failure_domain"] == "zone-b"
    assert got["kubernetes_version"] == "v1.31.4+rke2r1"
    assert got["control_plane"] is False
    assert got["captf_cluster_outputs"] == {"network_id": "net-1"}


@pytest.mark.parametrize(
    ("labels", "expected"), [({}, False), ({"cluster.x-k8s.io/control-plane": ""}, True)]
)
def test_control_plane_is_the_label_s_presence(labels: Json, expected: bool) -> None:
    machine = _machine()
    machine["metadata"]["labels"] = labels
    got = inputs.machine_inputs(
        obj=terraform_object("m"),
        machine=machine,
        cluster=cluster(),
        bootstrap=bootstrap_of(bootstrap_secret()),
        exports={},
    )
    assert got["control_plane"] is expected


def test_null_exports_are_handed_over_as_an_empty_object() -> None:
    assert inputs.cluster_exports(None) == {}
    assert inputs.cluster_exports([1]) == [1]


# --- machine pool --------------------------------------------------------------------

MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"


def _pool(replicas: int | None = 3, annotations: dict[str, str] | None = None) -> Json:
    spec: Json = {
        "failureDomains": ["zone-a"],
        "template": {"metadata": {"labels": {"tier": "web"}}, "spec": {"version": "v1.33.0"}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "metadata": {"name": "prod-pool", "namespace": "team-a", "annotations": annotations or {}},
        "spec": spec,
    }


MANAGED = "cluster.x-k8s.io/replicas-managed-by"
BOUNDS = {MIN: "1", MAX: "5"}


@pytest.mark.parametrize(
    ("replicas", "annotations", "observed", "expected"),
    [
        (3, {}, None, 3),
        (None, {}, None, 1),
        (0, {}, None, 0),
        (3, {}, 7, 3),  # fixed replicas: the spec is authoritative
        # Issue 37: the autoscaler's annotations alone leave spec.replicas the size (the
        # cluster-autoscaler writes it through /scale), only bounded by them.
        (4, BOUNDS, 2, 4),
        (3, BOUNDS, None, 3),
        (9, BOUNDS, 4, 5),
        (0, {MIN: "2", MAX: "5"}, None, 2),
        (0, {MIN: "0", MAX: "5"}, None, 0),  # scale from zero
        (3, {MIN: "1"}, 4, 3),  # invalid bounds bound nothing
        # The user's replicas-managed-by: the cloud sizes the group.
        (3, BOUNDS | {MANAGED: "cloud"}, None, 3),
        (3, BOUNDS | {MANAGED: "cloud"}, 4, 4),
        (3, BOUNDS | {MANAGED: "cloud"}, 9, 5),
        (3, {MIN: "2", MAX: "5", MANAGED: "cloud"}, 0, 2),
        (3, BOUNDS | {MANAGED: "false"}, 4, 3),  # "false" is Cluster API's "not managed"
        (3, {MANAGED: "cloud"}, 4, 3),  # no bounds to give the cloud: spec.replicas
    ],
)
def test_pool_replicas(
    replicas: int | None, annotations: dict[str, str], observed: int | None, expected: int
) -> None:
    pool = _pool(replicas, annotations)
    got = inputs.pool_replicas(
        pool=pool, autoscaling=sizing.autoscaling_of(pool), observed=observed
    )
    assert got == expected


_SIZES = st.integers(min_value=0, max_value=20)
_NOTE = st.one_of(st.none(), _SIZES.map(str), st.sampled_from(["", "x", "-1"]))
_MANAGED_BY = st.one_of(st.none(), st.sampled_from(["cloud", "false", "", "captf"]))


@given(spec=_SIZES, observed=st.one_of(st.none(), _SIZES), low=_NOTE, high=_NOTE, by=_MANAGED_BY)
def test_the_observed_size_is_rendered_only_when_the_cloud_sizes_the_group(
    spec: int, observed: int | None, low: str | None, high: str | None, by: str | None
) -> None:
    """Issue 37's invariant: without the user's replicas-managed-by (or without valid
    bounds) the module's `replicas` is spec.replicas, held within valid bounds, whatever
    was observed; the hash covers it exactly then."""
    notes = {k: v for k, v in ((MIN, low), (MAX, high), (MANAGED, by)) if v is not None}
    pool = _pool(spec, notes)
    scaling = sizing.autoscaling_of(pool)
    got = inputs.pool_replicas(pool=pool, autoscaling=scaling, observed=observed)
    if scaling.bounded:
        assert scaling.min <= got <= scaling.max
    if not scaling.enabled:
        assert got == scaling.clamp(spec)
        assert got == inputs.pool_replicas(pool=pool, autoscaling=scaling, observed=None)
    assert scaling.enabled == (by not in (None, "false") and scaling.bounded)
    rendered = _pool_inputs(pool, observed)
    assert ("replicas" in inputs.hashed_inputs(Role.MACHINEPOOL, rendered)) is not scaling.enabled


def _pool_inputs(pool: Json, observed: int | None = None) -> Json:
    return inputs.pool_inputs(
        obj=terraform_object("prod-pool-infra"),
        pool=pool,
        cluster=cluster("prod"),
        bootstrap=bootstrap_of(bootstrap_secret()),
        exports=None,
        cluster_failure_domains=("zone-a", "zone-b"),
        observed_replicas=observed,
    )


def test_pool_inputs() -> None:
    got = _pool_inputs(_pool(2))
    assert set(got) == contract_of(Role.MACHINEPOOL).input_names
    assert got["machinepool_name"] == "prod-pool"
    assert got["replicas"] == 2
    assert got["failure_domains"] == ["zone-a"]
    assert got["cluster_failure_domains"] == ["zone-a", "zone-b"]
    assert got["kubernetes_version"] == "v1.33.0"
    assert got["node_labels"] == {"tier": "web"}
    assert got["autoscaling"] == {"enabled": False, "min": 0, "max": 0}
    assert got["captf_cluster_outputs"] == {}


def test_an_empty_pool_spec_renders_empty_collections() -> None:
    pool = {"metadata": {"name": "p", "namespace": "team-a"}, "spec": {}}
    got = _pool_inputs(pool)
    assert (got["failure_domains"], got["node_labels"], got["kubernetes_version"]) == ([], {}, None)


def test_the_hash_leaves_out_replicas_only_while_the_cloud_sizes_the_group() -> None:
    fixed = _pool_inputs(_pool(2))
    assert inputs.hashed_inputs(Role.MACHINEPOOL, fixed) == fixed
    # Issue 37: under the autoscaler's annotations alone a change of spec.replicas (its
    # /scale) is an apply.
    bounded = [
        inputs.hashed_inputs(Role.MACHINEPOOL, _pool_inputs(_pool(n, BOUNDS))) for n in (2, 4)
    ]
    assert [h["replicas"] for h in bounded] == [2, 4]
    assert bounded[0] != bounded[1]
    managed = BOUNDS | {MANAGED: "cloud"}
    scaled = _pool_inputs(_pool(2, managed), observed=4)
    assert "replicas" not in inputs.hashed_inputs(Role.MACHINEPOOL, scaled)
    assert inputs.hashed_inputs(Role.MACHINEPOOL, _pool_inputs(_pool(2, managed), 3)) == (
        inputs.hashed_inputs(Role.MACHINEPOOL, scaled)
    )
