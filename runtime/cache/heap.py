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

While the caches fill, raised thresholds are not enough: what survives the young
collections is cache, and it piles up in the middle generation, whose collection
then walks all of it (hundreds of milliseconds for a 10,000-object start-up on a
busy machine). `FreezeWhileFilling`, an informer handler, freezes the heap every
`FILL_STEP` objects added until the sync, so that no collection walks more than
that many objects' worth (a freeze moves a list head: it costs nothing).

Figures: CPython's defaults are (700, 10, 10). Ours: a young collection every
50,000 net allocations (a few milliseconds over that many young objects), a
middle one every 20 young ones, a full one every 100 middle ones (about every
10^8 allocations, over what was not frozen)."""

from __future__ import annotations

import gc
import time

from runtime.cache.resource import Obj

THRESHOLDS = (50_000, 20, 100)
# Objects added between two freezes while filling: 2,000 Jobs are about 35,000 tracked
# containers, a collection of a few milliseconds.
FILL_STEP = 2_000


def raise_thresholds() -> None:
    gc.set_threshold(*THRESHOLDS)


def settle_after_sync() -> None:
    """Freeze everything alive (no full pass first), with the thresholds raised."""
    gc.freeze()
    raise_thresholds()


class FreezeWhileFilling:
    """An informer handler (every informer's, one instance): freezes the heap each
    `step` objects added, until `settle` ends the filling with a last freeze."""

    def __init__(self, step: int = FILL_STEP) -> None:
        self._step = step
        self._added = 0
        self._filling = True

    def __call__(self, old: Obj | None, new: Obj | None) -> None:
        if not self._filling or old is not None or new is None:
            return
        self._added += 1
        if self._added % self._step == 0:
            gc.freeze()

    def settle(self) -> None:
        """The caches have synced: freeze what lives, and freeze no more."""
        self._filling = False
        settle_after_sync()


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
