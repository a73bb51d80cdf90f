"""What a plan changes, as a person reads it at a glance: how many resources it creates,
updates, replaces and deletes, and the first addresses of each (never a value).

The runner computes it from every plan it makes (a plan, an apply, a drift check) and
reports it in its result; the controller shows it as `status.lastRun.changes` and on the
TerraformPlan, and `captf plan show` and `captf get -o wide` print it. One codec:
`to_json` writes it, `from_json` reads it back and refuses anything else."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from runtime.jsonobj import Json

# The actions counted, in the order they are shown.
COUNTED: Final = ("create", "update", "replace", "delete")
# The addresses listed per action; the counts cover them all.
ADDRESSES_SHOWN: Final = 20
# An address longer than this is cut (module paths with for_each keys can be long).
ADDRESS_LIMIT: Final = 256


@dataclass(frozen=True)
class Changes:
    counts: Mapping[str, int] = field(default_factory=dict)  # action -> count, COUNTED
    addresses: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # at most 20 each

    def to_json(self) -> Json:
        out: Json = {action: int(self.counts.get(action, 0)) for action in COUNTED}
        listed = {a: list(self.addresses[a]) for a in COUNTED if self.addresses.get(a)}
        if listed:
            out["addresses"] = listed
        return out

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def listed(self) -> int:
        return sum(len(v) for v in self.addresses.values())

    def keeping(self, shown: int) -> Changes:
        """The same counts with `shown` addresses in all, taken from each action in turn
        (the first of each action before the second of any): what gives way when the
        runner's result must fit its limit."""
        kept: dict[str, list[str]] = {a: [] for a in COUNTED}
        rank = 0
        while shown > 0 and any(len(self.addresses.get(a, ())) > rank for a in COUNTED):
            for action in COUNTED:
                found = self.addresses.get(action, ())
                if shown > 0 and len(found) > rank:
                    kept[action].append(found[rank])
                    shown -= 1
            rank += 1
        return Changes(self.counts, {a: tuple(v) for a, v in kept.items() if v})

    def line(self) -> str:
        """`2 to create, 1 to replace` (the actions with a count), or `no changes`."""
        said = [f"{self.counts[a]} to {a}" for a in COUNTED if self.counts.get(a)]
        return ", ".join(said) if said else "no changes"


def changes_of(pairs: Iterable[tuple[str, str]]) -> Changes:
    """The changes of (address, action) pairs, each action one of COUNTED (others, such
    as forget, are not counted)."""
    counts = dict.fromkeys(COUNTED, 0)
    addresses: dict[str, list[str]] = {a: [] for a in COUNTED}
    for address, action in pairs:
        if action not in counts:
            continue
        counts[action] += 1
        if len(addresses[action]) < ADDRESSES_SHOWN:
            addresses[action].append(address[:ADDRESS_LIMIT])
    return Changes(counts, {a: tuple(v) for a, v in addresses.items() if v})


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def from_json(body: object) -> Changes | None:
    """The changes a result or a status holds; None when it is not shaped so."""
    if not isinstance(body, dict) or set(body) - {*COUNTED, "addresses"}:
        return None
    if not all(_count(body.get(a, 0)) for a in COUNTED):
        return None
    listed = body.get("addresses", {})
    if not isinstance(listed, dict) or set(listed) - set(COUNTED):
        return None
    for values in listed.values():
        if not isinstance(values, list) or len(values) > ADDRESSES_SHOWN:
            return None
        if not all(isinstance(v, str) and len(v) <= ADDRESS_LIMIT for v in values):
            return None
    return Changes(
        {a: int(body.get(a, 0)) for a in COUNTED},
        {a: tuple(v) for a, v in listed.items() if v},
    )
