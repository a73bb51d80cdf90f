"""A plan's summary: what a person approving it sees, and what tells two plans apart.

The runner writes it as the `captf.io/plan-summary` annotation of the plan Secret it
keeps; the controller copies it into the TerraformPlan's status. It holds addresses,
actions, counts and a fingerprint: never a value (the values stay in the Secret's data).

The fingerprint is a SHA-256 over the plan's changes (addresses, actions, before and
after values, in a canonical order): two plans with equal fingerprints make the same
changes; it cannot be turned back into the values."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from runtime.jsonobj import Json

# The actions counted, in the order they are shown.
COUNTED = ("create", "update", "replace", "delete")
# At most this many addresses are listed; the counts cover them all.
RESOURCES_LIMIT = 50


@dataclass(frozen=True)
class Resource:
    address: str
    action: str  # create, update, replace, delete or forget


@dataclass(frozen=True)
class PlanSummary:
    fingerprint: str
    counts: tuple[tuple[str, int], ...]  # (action, count) in COUNTED order
    resources: tuple[Resource, ...] = ()  # at most RESOURCES_LIMIT

    def to_json(self) -> Json:
        """As the annotation holds it, and as the TerraformPlan's status shows it."""
        return {
            "fingerprint": self.fingerprint,
            "counts": dict(self.counts),
            "resources": [{"address": r.address, "action": r.action} for r in self.resources],
        }

    def encode(self) -> str:
        return orjson.dumps(self.to_json()).decode()


def action_of(actions: list[str]) -> str | None:
    """The one action shown for OpenTofu's actions list; None for no-op and read."""
    if "delete" in actions and "create" in actions:
        return "replace"
    for action in ("create", "update", "delete", "forget"):
        if action in actions:
            return action
    return None


def summary_of(changes: list[tuple[str, str]], fingerprint: str) -> PlanSummary:
    """The summary of (address, action) pairs, each action from `action_of`."""
    counts = tuple((action, sum(1 for _, a in changes if a == action)) for action in COUNTED)
    listed = tuple(Resource(address, action) for address, action in changes[:RESOURCES_LIMIT])
    return PlanSummary(fingerprint=fingerprint, counts=counts, resources=listed)


def decode(raw: str | None) -> PlanSummary | None:
    """The summary an annotation holds; None when absent or not a summary (a Secret
    written by an older runner, or edited by hand: the plan then shows no changes)."""
    if not raw:
        return None
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return from_json(body)


def from_json(body: object) -> PlanSummary | None:
    """A summary read back from its JSON form (an annotation or a TerraformPlan status)."""
    if not isinstance(body, dict) or not isinstance(body.get("fingerprint"), str):
        return None
    counts = body.get("counts") if isinstance(body.get("counts"), dict) else {}
    assert isinstance(counts, dict)
    listed = body.get("resources") if isinstance(body.get("resources"), list) else []
    assert isinstance(listed, list)
    resources = tuple(
        Resource(str(r["address"]), str(r["action"]))
        for r in listed[:RESOURCES_LIMIT]
        if isinstance(r, dict) and "address" in r and "action" in r
    )
    return PlanSummary(
        fingerprint=body["fingerprint"],
        counts=tuple((a, _count(counts.get(a))) for a in COUNTED),
        resources=resources,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
