"""Reading a saved plan (`tofu show -json`): what it destroys, and what it changes.

Pure functions over the JSON plan representation; `resource_changes[].change.actions`
is one of ["no-op"], ["create"], ["read"], ["update"], ["delete"],
["delete", "create"], ["create", "delete"] (replacements) or ["forget"]."""

from __future__ import annotations

import hashlib

import orjson

from controller.core.basics.changes import Changes, changes_of
from controller.core.basics.plan_summary import PlanSummary, action_of, summary_of
from runtime.jsonobj import Json

# Actions that leave real infrastructure as it is: they are not "changes" when
# an approved plan is compared with a fresh one.
_INERT = frozenset({"no-op", "read"})

# What identifies a change and what it does; the rest of the JSON (timestamps,
# the configuration, prior state) differs between two plans of the same change.
_CHANGE_FIELDS = ("actions", "before", "after", "after_unknown", "replace_paths")


def _resource_changes(plan: Json) -> list[Json]:
    changes = plan.get("resource_changes") or []
    return [c for c in changes if isinstance(c, dict)]


def _actions(change: Json) -> list[str]:
    return list((change.get("change") or {}).get("actions") or [])


# The replacement of a resource an earlier apply failed to finish creating (the provider
# marked it tainted): a half-made resource, never one in service, so replacing it is how
# a failed apply converges, and waiting for a person would only hold the object back.
_UNFINISHED = "replace_because_tainted"


def destroyed(plan: Json) -> list[str]:
    """Addresses the plan deletes or replaces (the destructive guard's concern), but not
    the replacement of a tainted resource."""
    return [
        c.get("address", "?")
        for c in _resource_changes(plan)
        if "delete" in _actions(c) and c.get("action_reason") != _UNFINISHED
    ]


def changed(plan: Json) -> list[str]:
    """`<action> <address>` for every resource the plan would change."""
    return [
        f"{'/'.join(_actions(c))} {c.get('address', '?')}"
        for c in _resource_changes(plan)
        if not set(_actions(c)) <= _INERT
    ]


def fingerprint(plan: Json) -> list[Json]:
    """The plan's effect on infrastructure, comparable between two plans.

    Two plans with equal fingerprints make the same changes to the same
    resources with the same values."""
    result = []
    for c in _resource_changes(plan):
        if set(_actions(c)) <= _INERT:
            continue
        change = c.get("change") or {}
        entry = {"address": c.get("address")} | {f: change.get(f) for f in _CHANGE_FIELDS}
        result.append(entry)
    return sorted(result, key=lambda e: str(e["address"]))


def differences(approved: Json, fresh: Json) -> list[str]:
    """Addresses whose change differs between the approved plan and a fresh one."""
    old = {str(e["address"]): e for e in fingerprint(approved)}
    new = {str(e["address"]): e for e in fingerprint(fresh)}
    return sorted(a for a in old.keys() | new.keys() if old.get(a) != new.get(a))


def summarize(plan: Json) -> PlanSummary:
    """Addresses and actions of what the plan changes, and the fingerprint of its changes
    (a hash over `fingerprint`, which holds values: the hash shows none of them)."""
    changes = [
        (str(c.get("address", "?")), action)
        for c in _resource_changes(plan)
        if (action := action_of(_actions(c))) is not None
    ]
    canonical = orjson.dumps(fingerprint(plan), option=orjson.OPT_SORT_KEYS)
    return summary_of(changes, f"sha256:{hashlib.sha256(canonical).hexdigest()}")


def changes(plan: Json) -> Changes:
    """What the plan creates, updates, replaces and deletes: counts, first addresses."""
    return changes_of(
        (str(c.get("address", "?")), action)
        for c in _resource_changes(plan)
        if (action := action_of(_actions(c))) is not None
    )
