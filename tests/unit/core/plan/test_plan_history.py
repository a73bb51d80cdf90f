"""One pass classifies its Jobs once per view of the object, however many rules read them."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.decide import snapshot
from controller.core.decide.decision import Idle
from controller.core.jobs.history import History
from controller.core.plan.planner import plan_pass
from tests import builders as b


def test_a_pass_builds_the_history_once_per_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    original = History.__init__

    def counting(self: History, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(History, "__init__", counting)
    jobs = [b.job("apply", seq, finished=b.ago(minutes=10 * (4 - seq))) for seq in (1, 2, 3)]
    snap = snapshot.build(b.captf(), b.base_objects() + jobs)
    todo = plan_pass(snap, b.NOW)
    # The snapshot as read and the one with this pass's bookkeeping: two views, two builds
    # (every rule of the pass reads one of them: decide, status, pruning, the capped label).
    assert len(built) <= 2
    assert isinstance(todo.decision, Idle)  # the newest apply succeeded on these inputs
