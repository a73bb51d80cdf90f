"""Change windows in DecideOp: apply and destroy wait for a window; drift, refresh, plan
and restore do not; a retry whose backoff outlasts the open window reports it missed."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from controller.core.basics.names import ANN_RESTORE_SERIAL, FINALIZER
from controller.core.decide import snapshot
from controller.core.decide.decision import Decision, Requeue, Run, to_json
from controller.core.decide.steps import decide
from controller.core.plan.status import missed_window_of
from runtime.jsonobj import Json
from tests.builders import NOW, ago, approval, base_objects, captf, decided, job

# NOW is Monday 2026-06-01 12:00Z.
LATER = [{"start": "22:00", "duration": "2h"}]  # opens in 10 h
OPEN = [{"start": "11:00", "duration": "2h"}]  # open until 13:00
CLOSING = [{"start": "11:50", "duration": "15m"}]  # open until 12:05
TEN_HOURS = 36000.0


def _obj(windows: list[Json], **spec: Any) -> Json:
    return {"changeWindows": windows, **spec}


def _outside(op: str) -> Json:
    return {"action": "requeue", "op": op, "reason": "OutsideChangeWindow", "after": TEN_HOURS}


def _run(op: str, reason: str, retry: int = 1) -> Json:
    return {"action": "run", "op": op, "reason": reason, "retry": retry}


NEW = {"variables": {"size": 4}}
APPLIED = job("apply", 1, "succeeded", finished=ago(120))


def _fails(op: str, *minutes_ago: float) -> list[Json]:
    return [job(op, i + 1, "failed", finished=ago(m)) for i, m in enumerate(minutes_ago)]


CASES: list[tuple[str, Json, list[Json], Json]] = [
    (
        "apply outside a window waits",
        captf(spec=_obj(LATER, **NEW)),
        base_objects(),
        _outside("apply"),
    ),
    (
        "apply inside a window runs",
        captf(spec=_obj(OPEN, **NEW)),
        base_objects(),
        _run("apply", "InputsChanged"),
    ),
    (
        "destroy outside a window waits",
        captf(spec=_obj(LATER), deleting=ago(5), finalizers=[FINALIZER]),
        base_objects(),
        _outside("destroy"),
    ),
    (
        "an approved blocked apply still waits for the window",
        captf(spec=_obj(LATER, **NEW)),
        [*base_objects(), job("apply", 1, "blocked"), approval("c1-apply-00000001", {"size": 4})],
        _outside("apply"),
    ),
    (
        "drift is not gated",
        captf(spec=_obj(LATER, drift={"interval": "1h"})),
        [*base_objects(), APPLIED],
        _run("drift", "DriftCheckDue"),
    ),
    (
        "refresh is not gated",
        captf(spec=_obj(LATER, refresh={"interval": "1h"})),
        [*base_objects(), APPLIED],
        _run("refresh", "RefreshDue"),
    ),
    (
        "a Manual plan is not gated",
        captf(spec=_obj(LATER, approval={"mode": "Manual"}, **NEW)),
        base_objects(),
        _run("plan", "InputsChanged"),
    ),
    (
        "restore is not gated",
        captf(spec=_obj(LATER), annotations={ANN_RESTORE_SERIAL: "2"}),
        base_objects(),
        _run("restore", "RestoreRequested"),
    ),
    (
        "backoff ending inside the open window: a plain backoff",
        captf(spec=_obj(CLOSING, **NEW)),
        [*base_objects(), *_fails("apply", 5, 1)],
        {"action": "requeue", "op": "apply", "reason": "InputsChangedBackoff", "after": 60.0},
    ),
    (
        "backoff ending after the window closes: that window is missed",
        captf(spec=_obj(CLOSING, **NEW)),
        [*base_objects(), *_fails("apply", 20, 10, 2)],
        {
            "action": "requeue",
            "op": "apply",
            "reason": "InputsChangedBackoff",
            "after": 480.0,
        },
    ),
    (
        "backoff over, outside a window: waits for the next one",
        captf(spec=_obj(LATER, **NEW)),
        [*base_objects(), *_fails("apply", 60)],
        _outside("apply"),
    ),
    (
        "a drift backoff misses no window",
        captf(spec=_obj(CLOSING, drift={"interval": "1m"})),
        [*base_objects(), APPLIED, *_fails("drift", 20, 10, 2)],
        {"action": "requeue", "op": "drift", "reason": "DriftCheckDueBackoff", "after": 480.0},
    ),
]


@pytest.mark.parametrize(
    ("obj", "others", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_change_window_gating(obj: Json, others: list[Json], expected: Json) -> None:
    assert decided(obj, others) == expected


def test_the_retry_runs_when_the_next_window_opens() -> None:
    obj = captf(spec=_obj(LATER, **NEW))
    others = [*base_objects(), *_fails("apply", 60)]
    opening = NOW.replace(hour=22)
    assert decided(obj, others, opening) == _run("apply", "InputsChanged", 2)


MISSED = {"opens": "2026-06-01T11:50:00Z", "closes": "2026-06-01T12:05:00Z"}


def _missed_decision(at: datetime = NOW) -> Decision:
    obj = captf(spec=_obj(CLOSING, **NEW))
    return decide(snapshot.build(obj, [*base_objects(), *_fails("apply", 20, 10, 2)]), at)


def test_verbose_output_names_the_missed_window() -> None:
    out = to_json(_missed_decision(), verbose=True)
    assert out["missedWindow"] == MISSED
    assert out["reason"] == "InputsChangedBackoff"


def test_the_status_shows_the_missed_window_until_the_op_runs() -> None:
    missed = missed_window_of(None, _missed_decision(), NOW)
    assert missed == {"op": "apply", **MISSED}
    # 12:06: the window has closed, the backoff (until 12:08) still holds: kept.
    after_close = NOW + timedelta(minutes=6)
    backoff = _missed_decision(after_close)
    assert isinstance(backoff, Requeue)
    assert backoff.missed_window is None
    assert missed_window_of(missed, backoff, after_close) == missed
    # 12:09: the backoff is over and no window is open: still the same op waiting.
    outside = _missed_decision(NOW + timedelta(minutes=9))
    assert isinstance(outside, Requeue)
    assert outside.reason == "OutsideChangeWindow"
    assert missed_window_of(missed, outside, NOW + timedelta(minutes=9)) == missed
    # The op runs: gone.
    ran = Run(op="apply", reason="InputsChanged", retry=4)
    assert missed_window_of(missed, ran, NOW + timedelta(days=1)) is None
    # A wait about another op, or a window still open, does not keep it.
    other = Requeue(reason="DriftCheckDueBackoff", after=5, op="drift")
    assert missed_window_of(missed, other, after_close) is None
    assert missed_window_of(missed, backoff, NOW) is None
