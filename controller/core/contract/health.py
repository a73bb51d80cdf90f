"""The InfrastructureHealthy condition, read off the `health` output by a fixed table.

`healthy` matters only while the state is running; a null health, and a state the
controller does not know, are Unknown, never False: a reading nobody could make must
not start a remediation."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.contract.shapes import Health

CONDITION = "InfrastructureHealthy"

# state -> (status, reason); running is split on `healthy`.
_TABLE = {
    "pending": ("False", "InstancePending"),
    "degraded": ("False", "InstanceDegraded"),
    "stopped": ("False", "InstanceStopped"),
    "terminated": ("False", "InstanceTerminated"),
    "unknown": ("Unknown", "HealthUnknown"),
}
_RUNNING = {True: ("True", "Healthy"), False: ("False", "InstanceUnhealthy")}
_UNKNOWN = ("Unknown", "HealthUnknown")


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown", as Kubernetes conditions spell it
    reason: str
    message: str


def health_condition(health: Health | None) -> Condition:
    if health is None:
        status, reason = _UNKNOWN
    elif health.state == "running":
        status, reason = _RUNNING[health.healthy]
    else:
        status, reason = _TABLE.get(health.state, _UNKNOWN)
    return Condition(CONDITION, status, reason, _message(health) or reason)


def _message(health: Health | None) -> str:
    """`<message>; reasons: a, b`, leaving out whichever part is unset or empty."""
    if health is None:
        return ""
    parts = [health.message] if health.message else []
    if health.reasons:
        parts.append(f"reasons: {', '.join(health.reasons)}")
    return "; ".join(parts)
