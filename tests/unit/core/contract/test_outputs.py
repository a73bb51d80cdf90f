"""Decoding a root's outputs by the contract's null semantics and shapes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.contract.outputs import (
    INSTANCES_MAX,
    ClusterOutputs,
    Invalid,
    MachineOutputs,
    Missing,
    Pending,
    PoolOutputs,
    Valid,
    decode,
    missing_outputs,
    values_of,
)
from controller.core.contract.roles import Role, contract_of
from controller.core.contract.shapes import Address, Endpoint, FailureDomain, Health

HEALTHY = {"state": "running", "healthy": True, "message": None, "reasons": []}

GOOD: dict[Role, dict[str, Any]] = {
    Role.CLUSTER: {
        "control_plane_endpoint": {"host": "127.0.0.1", "port": 6443},
        "failure_domains": [{"name": "zone-a"}, {"name": "zone-b", "control_plane": False}],
        "exports": {"network_id": "net-1"},
        "health": HEALTHY,
    },
    Role.MACHINE: {
        "provider_id": "captf://prod/m-1",
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        "failure_domain": None,
        "interruptible": False,
        "health": HEALTHY,
    },
    Role.MACHINEPOOL: {
        "provider_id": "captf://prod/pool",
        "provider_id_list": ["captf://prod/pool/1", "captf://prod/pool/0"],
        "replicas": 2,
        "instances": [{"provider_id": "captf://prod/pool/0", "state": "running"}],
        "health": HEALTHY,
    },
}


def with_(role: Role, **changes: Any) -> dict[str, Any]:
    return {**GOOD[role], **changes}


def test_good_cluster_outputs() -> None:
    got = decode(Role.CLUSTER, GOOD[Role.CLUSTER])
    assert got == Valid(
        ClusterOutputs(
            control_plane_endpoint=Endpoint("127.0.0.1", 6443),
            failure_domains=(
                FailureDomain("zone-a", True, {}),
                FailureDomain("zone-b", False, {}),
            ),
            exports={"network_id": "net-1"},
            health=Health("running", True, None, ()),
        )
    )


def test_good_machine_outputs() -> None:
    got = decode(Role.MACHINE, GOOD[Role.MACHINE])
    assert isinstance(got, Valid)
    assert got.outputs == MachineOutputs(
        provider_id="captf://prod/m-1",
        addresses=(Address("InternalIP", "10.0.0.1"),),
        failure_domain=None,
        interruptible=False,
        health=Health("running", True),
    )


def test_good_pool_outputs_sort_the_provider_ids() -> None:
    got = decode(Role.MACHINEPOOL, with_(Role.MACHINEPOOL, replicas=2.0))
    assert isinstance(got, Valid)
    assert isinstance(got.outputs, PoolOutputs)
    assert got.outputs.provider_id_list == ("captf://prod/pool/0", "captf://prod/pool/1")
    assert got.outputs.replicas == 2
    assert got.outputs.instances_truncated is False


def test_values_of_unwraps_tofu_output_json() -> None:
    raw = {"replicas": {"sensitive": True, "type": "number", "value": 2}}
    assert values_of(raw) == {"replicas": 2}


@pytest.mark.parametrize("role", list(Role))
def test_an_absent_output_reads_as_null(role: Role) -> None:
    """A state keeps no null output, so absent and null must decode alike."""
    for name in contract_of(role).outputs:
        absent = dict(GOOD[role])
        del absent[name]
        assert decode(role, absent) == decode(role, with_(role, **{name: None}))


@pytest.mark.parametrize("role", list(Role))
def test_a_state_without_contract_outputs_is_pending(role: Role) -> None:
    got = decode(role, {"something_else": 1})
    assert isinstance(got, Pending)
    assert "health" in got.waiting


PLAN_ERROR = """
Error: Unsupported attribute

  on main.tf.json line 33, in output.interruptible:
  33:       "value": "${module.role.interruptible}"
    |----------------
    | module.role is a object

This object does not have an attribute named "interruptible".

Error: Unsupported attribute

  on main.tf.json line 41, in output.health:
This object does not have an attribute named "health".
"""


def test_an_undeclared_output_is_missing_by_name_from_the_plan_error() -> None:
    got = missing_outputs(Role.MACHINE, PLAN_ERROR)
    assert got == Missing(("interruptible", "health"))
    assert got.message == "the module declares no output interruptible, health"


def test_other_failures_name_no_missing_output() -> None:
    assert missing_outputs(Role.MACHINE, "Error: Invalid value for input variable") is None
    # Attributes that are not contract outputs of the role are not its outputs.
    assert missing_outputs(Role.CLUSTER, PLAN_ERROR) == Missing(("health",))
    assert (
        missing_outputs(Role.MACHINEPOOL, 'does not have an attribute named "interruptible"')
        is None
    )
    text = 'This object does not have an attribute named "exports".'
    assert missing_outputs(Role.CLUSTER, text) == Missing(("exports",))


def _long(n: int) -> str:
    return "x" * n


BAD: list[tuple[Role, dict[str, Any], str, str]] = [
    # (role, changed outputs, output named, part of the reason)
    (Role.MACHINE, {"provider_id": 42}, "provider_id", "must be a string, got number"),
    (Role.MACHINE, {"provider_id": _long(513)}, "provider_id", "1 to 512"),
    (Role.MACHINE, {"provider_id": ["a"]}, "provider_id", "got list"),
    (Role.MACHINE, {"addresses": {"type": "InternalIP"}}, "addresses", "must be a list"),
    (Role.MACHINE, {"addresses": [{"type": "InternalIP"}]}, "addresses", "address must be"),
    (Role.MACHINE, {"addresses": [{"address": "1.2.3.4"}]}, "addresses", "type must be one of"),
    (
        Role.MACHINE,
        {"addresses": [{"type": "PublicIP", "address": "1.2.3.4"}]},
        "addresses",
        "got 'PublicIP'",
    ),
    (
        Role.MACHINE,
        {"addresses": [{"type": "Hostname", "address": ""}]},
        "addresses",
        "entry 0: address must be 1 to 256",
    ),
    (
        Role.MACHINE,
        {"addresses": [{"type": "Hostname", "address": "h"}] * 257},
        "addresses",
        "at most 256",
    ),
    (Role.MACHINE, {"addresses": ["10.0.0.1"]}, "addresses", "must be an object"),
    (Role.MACHINE, {"failure_domain": 3}, "failure_domain", "must be a string"),
    (Role.MACHINE, {"failure_domain": _long(257)}, "failure_domain", "1 to 256"),
    (Role.MACHINE, {"interruptible": "yes"}, "interruptible", "must be a bool"),
    (Role.MACHINE, {"health": "ok"}, "health", "must be an object"),
    (Role.MACHINE, {"health": {"state": "sleeping"}}, "health", "state must be one of"),
    (Role.MACHINE, {"health": {"healthy": True}}, "health", "got None"),
    (Role.MACHINE, {"health": {"state": "running", "healthy": "yes"}}, "health", "healthy"),
    (Role.MACHINE, {"health": {"state": "running", "message": 1}}, "health", "message"),
    (Role.MACHINE, {"health": {"state": "running", "reasons": "x"}}, "health", "reasons"),
    (Role.CLUSTER, {"failure_domains": "zone-a"}, "failure_domains", "must be a list"),
    (Role.CLUSTER, {"failure_domains": {"name": "a"}}, "failure_domains", "must be a list"),
    (Role.CLUSTER, {"failure_domains": [{"name": ""}]}, "failure_domains", "1 to 256"),
    (Role.CLUSTER, {"failure_domains": [{"name": _long(257)}]}, "failure_domains", "1 to 256"),
    (Role.CLUSTER, {"failure_domains": [{}]}, "failure_domains", "name must be a string"),
    (
        Role.CLUSTER,
        {"failure_domains": [{"name": f"z{i}"} for i in range(101)]},
        "failure_domains",
        "at most 100",
    ),
    (
        Role.CLUSTER,
        {"failure_domains": [{"name": "a"}, {"name": "a"}]},
        "failure_domains",
        "repeated: a",
    ),
    (
        Role.CLUSTER,
        {"failure_domains": [{"name": "a", "control_plane": "yes"}]},
        "failure_domains",
        "control_plane must be a bool",
    ),
    (
        Role.CLUSTER,
        {"failure_domains": [{"name": "a", "attributes": {"k": 1}}]},
        "failure_domains",
        "map of strings",
    ),
    (
        Role.CLUSTER,
        {"control_plane_endpoint": {"host": "api.example.com"}},
        "control_plane_endpoint",
        "both host and port",
    ),
    (
        Role.CLUSTER,
        {"control_plane_endpoint": {"port": 6443}},
        "control_plane_endpoint",
        "both host and port",
    ),
    (
        Role.CLUSTER,
        {"control_plane_endpoint": {"host": "a", "port": 70000}},
        "control_plane_endpoint",
        "1 to 65535",
    ),
    (
        Role.CLUSTER,
        {"control_plane_endpoint": {"host": "a", "port": "6443"}},
        "control_plane_endpoint",
        "port must be a number",
    ),
    (
        Role.CLUSTER,
        {"control_plane_endpoint": "https://a:6443"},
        "control_plane_endpoint",
        "must be an object",
    ),
    (Role.MACHINEPOOL, {"provider_id_list": "a"}, "provider_id_list", "must be a list"),
    (Role.MACHINEPOOL, {"provider_id_list": [1]}, "provider_id_list", "entry 0"),
    (Role.MACHINEPOOL, {"provider_id_list": [""]}, "provider_id_list", "1 to 512"),
    (Role.MACHINEPOOL, {"replicas": -1}, "replicas", "at least 0"),
    (Role.MACHINEPOOL, {"replicas": 1.5}, "replicas", "whole number"),
    (Role.MACHINEPOOL, {"replicas": "2"}, "replicas", "must be a number"),
    (Role.MACHINEPOOL, {"replicas": True}, "replicas", "must be a number"),
    (Role.MACHINEPOOL, {"provider_id": 7}, "provider_id", "must be a string"),
    (Role.MACHINEPOOL, {"instances": {}}, "instances", "must be a list"),
    (Role.MACHINEPOOL, {"instances": [{"state": "running"}]}, "instances", "provider_id"),
    (
        Role.MACHINEPOOL,
        {"instances": [{"provider_id": "a", "state": "up"}]},
        "instances",
        "health states",
    ),
    (
        Role.MACHINEPOOL,
        {"instances": [{"provider_id": "a", "addresses": [{"type": "X", "address": "b"}]}]},
        "instances",
        "addresses",
    ),
]


@pytest.mark.parametrize(("role", "changes", "name", "why"), BAD)
def test_a_bad_output_is_invalid_naming_it_and_why(
    role: Role, changes: dict[str, Any], name: str, why: str
) -> None:
    got = decode(role, with_(role, **changes))
    assert isinstance(got, Invalid), got
    assert got.name == name
    assert why in got.why
    assert got.reason == "OutputsInvalid"
    assert got.message.startswith(f"output {name} ")


def test_a_misplaced_machine_is_a_failure_domain_mismatch() -> None:
    values = with_(Role.MACHINE, failure_domain="zone-b")
    got = decode(Role.MACHINE, values, requested_failure_domain="zone-a")
    assert isinstance(got, Invalid)
    assert (got.name, got.reason) == ("failure_domain", "FailureDomainMismatch")
    assert isinstance(decode(Role.MACHINE, values, requested_failure_domain="zone-b"), Valid)
    assert isinstance(decode(Role.MACHINE, values), Valid)


PENDING = [
    (Role.MACHINE, {"provider_id": None}, ("provider_id",)),
    (Role.MACHINE, {"provider_id": ""}, ("provider_id",)),
    (Role.MACHINE, {"health": None, "addresses": None}, ("addresses", "health")),
    (Role.CLUSTER, {"health": None}, ("health",)),
    (
        Role.MACHINEPOOL,
        {"provider_id_list": None, "replicas": None},
        ("provider_id_list", "replicas"),
    ),
    (Role.MACHINEPOOL, {"instances": None}, ("instances",)),
]


@pytest.mark.parametrize(("role", "changes", "waiting"), PENDING)
def test_null_where_a_value_is_to_come_is_pending(
    role: Role, changes: dict[str, Any], waiting: tuple[str, ...]
) -> None:
    got = decode(role, with_(role, **changes))
    assert isinstance(got, Pending)
    assert got.waiting == waiting
    assert all(name in got.message for name in waiting)


NULL_MEANS: list[tuple[Role, str, Any, Any]] = [
    (Role.CLUSTER, "control_plane_endpoint", None, None),
    (Role.CLUSTER, "control_plane_endpoint", {"host": None, "port": None}, None),
    (Role.CLUSTER, "failure_domains", None, ()),
    (Role.CLUSTER, "failure_domains", [], ()),
    (Role.CLUSTER, "exports", None, {}),
    (Role.MACHINE, "interruptible", None, False),
    (Role.MACHINE, "failure_domain", None, None),
    (Role.MACHINE, "addresses", [], ()),
    (Role.MACHINEPOOL, "provider_id", None, None),
    (Role.MACHINEPOOL, "provider_id_list", [], ()),
]


@pytest.mark.parametrize(("role", "name", "value", "meaning"), NULL_MEANS)
def test_null_where_the_contract_gives_it_a_meaning(
    role: Role, name: str, value: Any, meaning: Any
) -> None:
    got = decode(role, with_(role, **{name: value}))
    assert isinstance(got, Valid), got
    assert getattr(got.outputs, name) == meaning


def test_addresses_come_in_canonical_order() -> None:
    given_order = [
        {"type": "Hostname", "address": "node-1"},
        {"type": "ExternalIP", "address": "203.0.113.9"},
        {"type": "InternalIP", "address": "10.0.0.9"},
        {"type": "ExternalDNS", "address": "node-1.example.com"},
        {"type": "InternalIP", "address": "10.0.0.1"},
        {"type": "InternalDNS", "address": "node-1.internal"},
    ]
    got = decode(Role.MACHINE, with_(Role.MACHINE, addresses=given_order))
    assert isinstance(got, Valid)
    assert [(a.type, a.address) for a in got.outputs.addresses] == [
        ("InternalIP", "10.0.0.1"),
        ("InternalIP", "10.0.0.9"),
        ("InternalDNS", "node-1.internal"),
        ("ExternalIP", "203.0.113.9"),
        ("ExternalDNS", "node-1.example.com"),
        ("Hostname", "node-1"),
    ]


def test_instances_beyond_the_cap_are_truncated_not_invalid() -> None:
    many = [{"provider_id": f"id-{i}"} for i in range(INSTANCES_MAX + 5)]
    got = decode(Role.MACHINEPOOL, with_(Role.MACHINEPOOL, instances=many))
    assert isinstance(got, Valid)
    assert len(got.outputs.instances) == INSTANCES_MAX
    assert got.outputs.instances_truncated is True


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = {
    "state": st.sampled_from(["running", "pending", "gone"]),
    "healthy": st.booleans(),
    "type": st.sampled_from(["InternalIP", "Hostname", "Nope"]),
    "address": st.text(max_size=4),
    "name": st.text(max_size=4),
    "host": st.text(max_size=4),
    "port": st.integers(-1, 70000),
    "provider_id": st.text(max_size=4),
}
# Near-miss values: objects whose keys are the contract's, so decoding gets past the
# first check more often than with arbitrary JSON.
NEAR = st.fixed_dictionaries({}, optional=FIELDS)
VALUE = JSON | NEAR | st.lists(NEAR, max_size=3)


@given(
    role=st.sampled_from(list(Role)),
    values=st.fixed_dictionaries(
        {},
        optional={name: VALUE for name in {n for r in Role for n in contract_of(r).outputs}},
    ),
)
def test_decoding_never_raises_and_always_gives_a_verdict(
    role: Role, values: dict[str, Any]
) -> None:
    got = decode(role, values)
    assert isinstance(got, Valid | Pending | Invalid)
    if isinstance(got, Invalid):
        assert got.name in contract_of(role).outputs
