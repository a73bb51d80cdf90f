"""Who may hold a coordination.k8s.io/v1 Lease: the pure half of leader election.

`next_action` looks at a Lease as read (or its absence), an identity and the time,
and says what to write; runtime/leader.py does the reading and writing. The
rules are client-go's: a holder renews its own Lease keeping its acquireTime;
anyone may take a Lease that is free (no holder) or whose renewTime plus
leaseDurationSeconds has passed, counting one more transition; otherwise wait."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict

# Releasing sets the duration to 1 s: a standby that still sees the released Lease as
# someone's waits at most that long.
RELEASED_DURATION = 1


class LeaseSpec(TypedDict, total=False):
    holderIdentity: str | None
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


@dataclass(frozen=True, slots=True)
class Create:
    """No Lease exists: create it, held by us."""

    spec: LeaseSpec


@dataclass(frozen=True, slots=True)
class Update:
    """Write `spec` over the Lease read: a renewal, or a takeover when `acquired`."""

    spec: LeaseSpec
    acquired: bool


@dataclass(frozen=True, slots=True)
class Wait:
    """Another holder's Lease is valid until `until`."""

    holder: str
    until: datetime


LeaseAction = Create | Update | Wait


def micro_time(t: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 UTC with microseconds."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def next_action(
    lease: Mapping[str, Any] | None, identity: str, now: datetime, *, lease_duration: float
) -> LeaseAction:
    """What `identity` should do with the Lease read at `now`. Pure."""
    duration = max(1, round(lease_duration))
    ours = LeaseSpec(
        holderIdentity=identity,
        leaseDurationSeconds=duration,
        acquireTime=micro_time(now),
        renewTime=micro_time(now),
        leaseTransitions=0,
    )
    if lease is None:
        return Create(ours)
    spec: Mapping[str, Any] = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    transitions = int(spec.get("leaseTransitions") or 0)
    if holder == identity:
        acquired_at = spec.get("acquireTime") or ours["acquireTime"]
        renewed: LeaseSpec = {**ours, "acquireTime": acquired_at, "leaseTransitions": transitions}
        return Update(renewed, acquired=False)
    renewed_at = _parse_time(spec.get("renewTime")) or _parse_time(spec.get("acquireTime"))
    if holder and renewed_at is not None:
        until = renewed_at + timedelta(seconds=int(spec.get("leaseDurationSeconds") or duration))
        if until > now:
            return Wait(holder, until)
    # Free (released, or never held) or expired: take it over.
    taken: LeaseSpec = {**ours, "leaseTransitions": transitions + 1}
    return Update(taken, acquired=True)


def released(lease: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The Lease as a clean shutdown leaves it: no holder, valid for 1 s. Pure."""
    spec = dict(lease.get("spec") or {})
    spec.update(
        holderIdentity=None,
        leaseDurationSeconds=RELEASED_DURATION,
        acquireTime=micro_time(now),
        renewTime=micro_time(now),
    )
    return {**lease, "spec": spec}
