"""When an object's infrastructure is provisioned: `status.initialization.provisioned`,
and for a pool also `status.ready` (what Cluster API v1.14's MachinePool controller
reads).

Derived from the state alone, never from Job history, so a moved object (whose status
was dropped) evaluates the same formula on the target. Latched: once true it stays
true whatever later outputs say, because Cluster API never takes it back; a later bad
reading shows on InfrastructureHealthy instead."""

from __future__ import annotations

from controller.core.contract.outputs import Decoded, MachineOutputs, Valid
from controller.core.contract.roles import Role


def provisioned(role: Role, decoded: Decoded, *, applied: bool, was_provisioned: bool) -> bool:
    """`applied`: the state carries the inputs hash of a successful apply.

    Every role needs valid outputs and a health that is not pending. A machine also needs
    its provider_id (a valid machine has one: a null one is pending). A pool needs no
    provider_id, which the contract makes optional, and may have no members at all."""
    if was_provisioned:
        return True
    if not applied or not isinstance(decoded, Valid):
        return False
    outputs = decoded.outputs
    if outputs.health is None or outputs.health.state == "pending":
        return False
    if role is Role.MACHINE:
        return isinstance(outputs, MachineOutputs) and outputs.provider_id is not None
    return True
