"""The InfrastructureHealthy table and the provisioned rule of each role."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.contract.health import health_condition
from controller.core.contract.outputs import decode, missing_outputs
from controller.core.contract.provisioned import provisioned
from controller.core.contract.roles import Role, contract_of
from controller.core.contract.shapes import Health
from tests.unit.core.contract.test_outputs import GOOD, with_


@pytest.mark.parametrize(
    ("health", "status", "reason"),
    [
        (Health("pending", True), "False", "InstancePending"),
        (Health("running", True), "True", "Healthy"),
        (Health("running", False), "False", "InstanceUnhealthy"),
        (Health("degraded", True), "False", "InstanceDegraded"),
        (Health("stopped", False), "False", "InstanceStopped"),
        (Health("terminated", False), "False", "InstanceTerminated"),
        (Health("unknown", True), "Unknown", "HealthUnknown"),
        (Health("sleeping", True), "Unknown", "HealthUnknown"),
        (None, "Unknown", "HealthUnknown"),
    ],
)
def test_the_health_table(health: Health | None, status: str, reason: str) -> None:
    got = health_condition(health)
    assert (got.type, got.status, got.reason) == ("InfrastructureHealthy", status, reason)


@pytest.mark.parametrize(
    ("message", "reasons", "expected"),
    [
        ("disk full", ("disk", "io"), "disk full; reasons: disk, io"),
        ("disk full", (), "disk full"),
        (None, ("disk",), "reasons: disk"),
        ("", (), "InstanceDegraded"),
        (None, (), "InstanceDegraded"),
    ],
)
def test_the_health_message(message: str | None, reasons: tuple[str, ...], expected: str) -> None:
    assert health_condition(Health("degraded", False, message, reasons)).message == expected


def test_a_null_health_reads_as_its_reason() -> None:
    assert health_condition(None).message == "HealthUnknown"


def _health(state: str) -> dict[str, Any]:
    return {"state": state, "healthy": state == "running"}


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize(
    ("changes", "applied", "expected"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"health": _health("pending")}, True, False),
        ({"health": _health("degraded")}, True, True),
        ({"health": _health("unknown")}, True, True),
        ({"health": None}, True, False),
        ({"health": {"state": "bogus"}}, True, False),
        ({"provider_id": None, "health": None}, True, False),
    ],
)
def test_the_provisioned_rule(
    role: Role, changes: dict[str, Any], applied: bool, expected: bool
) -> None:
    decoded = decode(role, with_(role, **changes))
    assert provisioned(role, decoded, applied=applied, was_provisioned=False) is expected


@pytest.mark.parametrize(
    ("role", "changes", "expected"),
    [
        (Role.MACHINE, {"provider_id": None}, False),
        (Role.MACHINE, {"provider_id": ""}, False),
        (Role.MACHINEPOOL, {"provider_id": None}, True),
        (Role.MACHINEPOOL, {"provider_id_list": [], "replicas": 0, "instances": []}, True),
        (Role.CLUSTER, {"control_plane_endpoint": None}, True),
        (Role.CLUSTER, {"exports": None, "failure_domains": None}, True),
    ],
)
def test_what_each_role_needs_besides(role: Role, changes: dict[str, Any], expected: bool) -> None:
    decoded = decode(role, with_(role, **changes))
    assert provisioned(role, decoded, applied=True, was_provisioned=False) is expected


@pytest.mark.parametrize("role", list(Role))
def test_provisioned_is_latched(role: Role) -> None:
    missing = missing_outputs(
        role, f'does not have an attribute named "{contract_of(role).outputs[0]}"'
    )
    assert missing is not None
    for decoded in (missing, decode(role, with_(role, health=_health("pending")))):
        assert provisioned(role, decoded, applied=False, was_provisioned=True) is True
    assert provisioned(role, decode(role, GOOD[role]), applied=True, was_provisioned=True)
