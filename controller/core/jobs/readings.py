"""What a Job's result says of the module contract's outputs: the reading the schedule
waits on (docs/module-contract.md).

The runner reports it in its result annotation as
`"contract": {"pending": [<outputs still null>], "health": <state or null>,
"healthy": <bool>}`, from the decoded outputs (controller/core/contract/outputs.py:
`Pending.waiting`, and the `health` output's state and `healthy`). A result without it
carries no reading: the module is not a contract root, or the runner predates the
reading, and nothing waits on it. A reading without `healthy` (a runner before it) says
nothing against a running instance: it reads as healthy, as it always did."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.jobs.job import result
from runtime.jsonobj import Json

# Health states that are no reading yet: the instance is coming up, or nobody could tell.
_NOT_YET = frozenset({None, "pending", "unknown"})
# Health that tells nothing of the instance: the output null, or the module could not tell.
_UNTOLD = frozenset({None, "unknown"})


@dataclass(frozen=True)
class Reading:
    pending: tuple[str, ...]  # contract outputs still null
    health: str | None  # the health output's state; None when it is null
    # The health output's `healthy`; None when the health is null or the runner predates it.
    healthy: bool | None = None

    @property
    def definite(self) -> bool:
        """Every awaited output is there and the health says what the instance is."""
        return not self.pending and self.health not in _NOT_YET

    @property
    def told(self) -> str | None:
        """The health state when it says how the instance is (running, pending, degraded,
        stopped, terminated); None for a null or `unknown` health."""
        return None if self.health in _UNTOLD else self.health

    @property
    def health_pending(self) -> bool:
        return self.health is None or self.health == "pending"

    @property
    def running_unhealthy(self) -> bool:
        """Running, and the module says `healthy = false` (InstanceUnhealthy)."""
        return self.health == "running" and self.healthy is False

    def waits_for(self, output: str) -> bool:
        """The contract output `output` is null (or empty) in this reading."""
        return output in self.pending


def reading_of(job: Json) -> Reading | None:
    """The Job's contract reading, or None when its result carries none (or a malformed
    one: a reading nobody can read is no reading)."""
    raw = (result(job) or {}).get("contract")
    if not isinstance(raw, dict):
        return None
    pending = raw.get("pending") or []
    health = raw.get("health")
    healthy = raw.get("healthy")
    if not isinstance(pending, list) or not all(isinstance(p, str) for p in pending):
        return None
    if health is not None and not isinstance(health, str):
        return None
    if healthy is not None and not isinstance(healthy, bool):
        return None
    return Reading(tuple(pending), health, healthy)
