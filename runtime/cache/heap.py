"""The garbage collector after the caches have synced.

Once the first lists are in, nearly every object in the process is long-lived
cache: plain dicts and lists, acyclic, freed only by reference counting when
an update replaces them. Left alone, each full collection walks all of them
(4.7 s stopped at 30,000 objects). `settle_after_sync` moves everything alive
into the permanent generation (`gc.freeze()`), which collections skip, and
raises the thresholds so that the churn of watch events and reconciles
(short-lived dicts) is collected in rare, small passes. The thresholds are
raised at start-up already (`raise_thresholds`), so that filling the caches
does not trigger full passes over a growing heap either; and the freeze is not
preceded by a collection, which would be exactly such a pass (the little cyclic
garbage alive at that moment stays, frozen).

Figures: CPython's defaults are (700, 10, 10). Ours: a young collection every
50,000 net allocations (a few milliseconds over that many young objects), a
middle one every 20 young ones, a full one every 100 middle ones (about every
10^8 allocations, over what was not frozen)."""

from __future__ import annotations

import gc
import time

THRESHOLDS = (50_000, 20, 100)


def raise_thresholds() -> None:
    gc.set_threshold(*THRESHOLDS)


def settle_after_sync() -> None:
    """Freeze everything alive (no full pass first), with the thresholds raised."""
    gc.freeze()
    raise_thresholds()


class PauseWatch:
    """The longest collection so far, from `gc.callbacks` (a collection stops everything)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._started: float | None = None

    def __enter__(self) -> PauseWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, _info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._started = now
        elif self._started is not None:
            self.longest = max(self.longest, now - self._started)
            self._started = None
