"""What this process remembers of its own writes, and only as long as it has to.

The caches lag the API server; a few things the controller wrote itself must be
remembered until they show there. Everything here is forgotten once the cache
shows it, once it stops mattering, or at the latest after a stated TTL, so the
memory stays bounded however long the process runs. A restarted process starts
with nothing, and the plan's rules are safe without it (the crash-replay test,
tests/unit/test_reconcile_replay.py, starts every restart from nothing).

  pending creates   Jobs created here that the cache does not show yet: the
                    decision waits (JobCacheBehind) instead of deciding from a
                    history that lacks them. Forgotten when the cache shows the
                    Job, or after PENDING_TTL (it was deleted before the cache saw it).
  deleted by us     Jobs pruned here: their disappearance is no interruption.
                    Forgotten after DELETED_TTL: by then the watch has reported the
                    delete and the status naming the Job (if any) has been rewritten.
  launches, freeing The janitor's side (controller/io/janitor.py): a launch of a
                    Job and the freeing of a Lease held in its name never run at once.
                    Each entry lasts as long as the write it guards.
  refusal streaks   The object's Jobs the API server refused, for the next pass to
                    plan the wait and the Warning. Forgotten when a Job of the
                    object is created, when the object is gone, or after REFUSAL_TTL.
  image answers     The registry's answer to the module image lookup a plan asked for
                    (controller/io/registry.py), handed as asked (the core lets only
                    such an answer choose the digest) to the object's next pass, and
                    to that one only: one answer decides one plan, as if that plan had
                    asked. Not handed over once the object's deletion began after the
                    ask (a deletion may need no image; if it does, its plan asks).
                    Forgotten once read, when the object is gone, or once the
                    registry's cache drops it (SUCCESS_TTL, FAILURE_TTL).

One event loop uses it (the reconciler's workers and the janitor): every method
runs to completion without an await, so it needs no lock."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator, Set
from dataclasses import replace
from datetime import datetime
from typing import Generic, TypeVar

from controller.core import STALE_AFTER, ImageFact, Refusal
from controller.core.basics.names import BACKOFF_CAP
from runtime.clock import Clock

K = TypeVar("K")
V = TypeVar("V")

# The lag the controller plans for between a write and its watch event: a healthy watch
# delivers within a second; a dropped connection is watched again from the last version
# after a backoff of at most 30 s (runtime/cache/reflector.py).
CACHE_LAG = 60.0
# A create the cache has not shown after this long was deleted before the cache saw it.
PENDING_TTL = 300.0
# The janitor frees a Lease held for a Job it cannot see only after STALE_AFTER: by then
# this process has stopped waiting for its own create to show (docs/controller.md).
assert STALE_AFTER > PENDING_TTL
# A pruned Job's delete reaches the cache within CACHE_LAG; the status write of the pass
# after it, which stops naming the Job, within another.
DELETED_TTL = 600.0
# Longer than the longest refusal wait (the backoff cap): a streak that goes on keeps
# counting, so its wait keeps growing and its Warning is not repeated.
REFUSAL_TTL = 2 * BACKOFF_CAP

assert PENDING_TTL > CACHE_LAG, "a create must be remembered until the cache can show it"
assert DELETED_TTL > 2 * CACHE_LAG, "a delete must be remembered past its watch event"
assert REFUSAL_TTL > BACKOFF_CAP, "a refusal streak must outlive its longest wait"


class BeingFreed(Exception):
    """The janitor is freeing Leases held in the name of the Job about to be launched."""


class _Expiring(Generic[K, V]):
    """Entries forgotten `ttl` seconds after they were last set."""

    def __init__(self, ttl: float, clock: Clock) -> None:
        self._ttl = ttl
        self._clock = clock
        # Oldest first (setting an entry moves it to the end; the monotonic clock never
        # goes back), so the expired ones are always at the front.
        self._entries: OrderedDict[K, tuple[V, float]] = OrderedDict()

    def set(self, key: K, value: V) -> None:
        self._entries.pop(key, None)
        self._entries[key] = (value, self._clock.monotonic())
        self._expire()

    def get(self, key: K) -> V | None:
        self._expire()
        found = self._entries.get(key)
        return None if found is None else found[0]

    def pop(self, key: K) -> None:
        self._entries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        self._expire()
        return key in self._entries

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    def items(self) -> list[tuple[K, V]]:
        self._expire()
        return [(key, value) for key, (value, _) in self._entries.items()]

    def _expire(self) -> None:
        now = self._clock.monotonic()
        while self._entries:
            _, (_, at) = next(iter(self._entries.items()))
            if now - at <= self._ttl:
                return
            self._entries.popitem(last=False)


class Memory:
    """The process memory of the reconciler, and what the janitor asks of it (its
    `Launches` Protocol: creating, begin_freeing, end_freeing)."""

    def __init__(self, clock: Clock) -> None:
        self._pending: _Expiring[str, str] = _Expiring(PENDING_TTL, clock)  # Job -> owner uid
        self._deleted: _Expiring[str, None] = _Expiring(DELETED_TTL, clock)
        self._refusals: _Expiring[str, Refusal] = _Expiring(REFUSAL_TTL, clock)  # object key
        # Object key -> the answer its plan asked for, whether that pass was deleting the
        # object, and until when (monotonic) the answer is fresh.
        self._answers: dict[str, tuple[ImageFact, bool, float]] = {}
        self._clock = clock
        # Launches in flight, and holders the janitor is freeing: never the same name at once.
        self._launching: set[str] = set()
        self._freeing: set[str] = set()

    # Pending creates.

    def launched(self, key: str, job: str, *, owner: str) -> None:
        """A Job of the object `key` (uid `owner`) was created: pending until the cache
        shows it; the object's refusal streak is over."""
        self._pending.set(job, owner)
        self._refusals.pop(key)

    def pending_for(self, owner: str, seen: Set[str]) -> frozenset[str]:
        """The Jobs created for the object `owner` that its cache does not show (`seen`
        are the Jobs it shows: those are forgotten). Matched by owner, not by name prefix:
        cluster "example" must not wait for a Job of pool "example-workers"."""
        mine = [job for job, uid in self._pending.items() if uid == owner]
        for job in mine:
            if job in seen:
                self._pending.pop(job)
        return frozenset(job for job in mine if job not in seen)

    # Deleted by us.

    def deleting(self, job: str) -> None:
        """Remembered before the delete is sent: its answer may be lost, not its effect."""
        self._deleted.set(job, None)

    @property
    def deleted(self) -> _Expiring[str, None]:
        """The Jobs deleted here, as a membership view (not a copy)."""
        return self._deleted

    # Launches and the janitor.

    @contextlib.contextmanager
    def launching(self, job: str) -> Iterator[None]:
        """Marks a launch of `job` in flight; BeingFreed while the janitor frees a Lease
        held in its name (once it is done, the claims read what it left)."""
        if job in self._freeing:
            raise BeingFreed(job)
        self._launching.add(job)
        try:
            yield
        finally:
            self._launching.discard(job)

    def creating(self) -> set[str]:
        """Jobs this process is creating, or created and the cache may not show yet (a
        copy: the janitor's sweep reads it across its awaits)."""
        return {job for job, _ in self._pending.items()} | self._launching

    def begin_freeing(self, job: str) -> bool:
        """Whether the janitor may free a Lease held by `job`: not while it is being created
        here; until `end_freeing`, no launch of `job` starts. (One event loop: the check and
        the mark are one step.)"""
        if job in self.creating():
            return False
        self._freeing.add(job)
        return True

    def end_freeing(self, job: str) -> None:
        self._freeing.discard(job)

    # Refusal streaks.

    def refused(self, key: str, job: str, why: str, at: datetime) -> Refusal:
        """The object's streak once the API server refused its `job`: one longer when the
        same Job was refused last, else a new streak, not yet announced."""
        last = self._refusals.get(key)
        if last is not None and last.job == job:
            streak = replace(last, count=last.count + 1, at=at, why=why)
        else:
            streak = Refusal(job, 1, at, why)
        self._refusals.set(key, streak)
        return streak

    def announced(self, key: str) -> None:
        """The streak's Warning was recorded."""
        streak = self._refusals.get(key)
        if streak is not None:
            self._refusals.set(key, replace(streak, announced=True))

    def refusal(self, key: str) -> Refusal | None:
        return self._refusals.get(key)

    # Image answers.

    def answered(self, key: str, fact: ImageFact, ttl: float, *, deleting: bool) -> None:
        """The registry answered the lookup the object's plan asked for, in a pass that
        was (not) deleting it; fresh for `ttl` seconds (as long as the registry caches it)."""
        now = self._clock.monotonic()
        for stale in [k for k, (*_, until) in self._answers.items() if until <= now]:
            del self._answers[stale]
        self._answers[key] = (fact, deleting, now + ttl)

    def answer(self, key: str, reference: str, *, deleting: bool) -> ImageFact | None:
        """The fresh answer the object's last plan asked for about `reference`, for the
        object as it was then (deleting or not), or None; either way forgotten."""
        found = self._answers.pop(key, None)
        if found is None:
            return None
        fact, asked_deleting, until = found
        usable = until > self._clock.monotonic() and asked_deleting == deleting
        return fact if usable and fact.reference == reference else None

    def forget(self, key: str) -> None:
        """The object is gone: its streak and its image answer with it (its Jobs' entries
        expire on their own)."""
        self._refusals.pop(key)
        self._answers.pop(key, None)
