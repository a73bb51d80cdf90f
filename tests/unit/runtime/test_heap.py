"""The collector after the initial sync: frozen, raised thresholds, pauses recorded."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from runtime.cache.heap import THRESHOLDS, FreezeWhileFilling, PauseWatch, settle_after_sync


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_settling_freezes_what_lives_and_raises_the_thresholds(restored_gc: None) -> None:
    cache = [{"metadata": {"name": f"o{i}"}} for i in range(1000)]
    settle_after_sync()
    assert gc.get_freeze_count() >= len(cache)
    assert gc.get_threshold() == THRESHOLDS


def test_the_longest_collection_is_recorded_and_the_callback_removed() -> None:
    with PauseWatch() as pauses:
        gc.collect()
    assert pauses.longest > 0
    assert all(
        callback.__self__ is not pauses
        for callback in gc.callbacks
        if hasattr(callback, "__self__")
    )


def test_the_heap_is_frozen_as_the_caches_fill_and_no_more_once_settled(
    restored_gc: None,
) -> None:
    filling = FreezeWhileFilling(step=10)
    gc.unfreeze()
    for i in range(9):
        filling(None, {"metadata": {"name": f"o{i}"}})
        filling({"old": i}, {"new": i})  # updates and deletes are not growth
        filling({"old": i}, None)
    assert gc.get_freeze_count() == 0
    filling(None, {"metadata": {"name": "o9"}})
    assert gc.get_freeze_count() > 0
    filling.settle()
    assert gc.get_threshold() == THRESHOLDS
    gc.unfreeze()
    for i in range(20):
        filling(None, {"metadata": {"name": f"late{i}"}})
    assert gc.get_freeze_count() == 0
