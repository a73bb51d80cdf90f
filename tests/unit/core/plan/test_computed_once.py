"""No pass computes a Lease claim or a runner RBAC verdict twice (issue 38): the guards
read the Leases once per due op (decide/claims.py's LeaseReading) and hand the claims to
the launch on the Run; the runner's verdict is the context's, read by the guard and by
the plan's condition alike. Counted over the reasons table's generated cases, every
module that holds each function patched, wherever it was imported."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from controller.core.decide import runner_rbac, snapshot
from controller.core.decide.decision import Run
from controller.core.leases import slots
from controller.core.plan.planner import plan_pass
from tests.builders import NOW
from tests.unit.core.decide.reasons_cases import cases

COUNTED: dict[str, Callable[..., Any]] = {
    "cluster_full": slots.cluster_full,  # the per-cluster cap of the Job's launch
    "free_slots": slots.free_slots,  # the run slots the launch may take
    "verdict": runner_rbac.verdict,  # the runner RBAC of the object's account
}


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    calls: Counter[str] = Counter()
    for name, original in COUNTED.items():

        def counted(*args: Any, _name: str = name, _f: Any = original, **kw: Any) -> Any:
            calls[_name] += 1
            return _f(*args, **kw)

        for module in [m for key, m in sys.modules.items() if key.startswith("controller.")]:
            for attr, value in list(vars(module).items()):
                if value is original:
                    monkeypatch.setattr(module, attr, counted)
    yield calls


def test_each_pass_reads_the_claims_and_the_verdict_at_most_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = verdicts = 0
    with counting(monkeypatch) as calls:
        for case in cases():
            snap = snapshot.build(case.objects[0], case.objects[1:])
            calls.clear()
            todo = plan_pass(snap, NOW, settings=case.settings, facts=case.facts)
            assert max(calls.values(), default=0) <= 1, (case.name, dict(calls))
            if isinstance(todo.decision, Run):
                runs += 1
                assert (calls["cluster_full"], calls["free_slots"]) == (1, 1), case.name
                assert todo.launch is not None
                assert todo.launch.claims is todo.decision.claims
                assert todo.launch.other_slots is todo.decision.other_slots
            if case.facts.runner is not None and todo.decision is not None:
                verdicts += calls["verdict"]
    assert runs >= 50
    assert verdicts >= 50
