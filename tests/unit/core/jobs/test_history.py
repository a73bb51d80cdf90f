"""Counting failures per op, derived from the Jobs that exist."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.core.decide import snapshot
from controller.core.decide.decision import Requeue, Run
from controller.core.decide.steps import decide
from controller.core.jobs.backoff import retry_number
from controller.core.jobs.history import History
from runtime.jsonobj import Json
from tests.builders import NOW, ago, base_objects, captf, job


def _history(jobs: list[Json]) -> History:
    return History(jobs, lambda _job: True)


def test_failures_counted_until_a_success_of_the_same_op() -> None:
    jobs = [
        job("apply", 1, "failed", finished=ago(50)),
        job("apply", 2, "succeeded", finished=ago(40)),
        job("apply", 3, "failed", finished=ago(30)),
        job("drift", 1, "succeeded", finished=ago(25)),
        job("apply", 4, "failed", finished=ago(20)),
    ]
    history = _history(jobs)
    assert [r.name for r in history.failures("apply")] == ["c1-apply-00000004", "c1-apply-00000003"]
    assert retry_number(history, "apply") == 3
    assert history.failures("drift") == []


# A free outcome: (runner outcome, Job failure reason).
FREE = st.sampled_from(
    [
        ("interrupted", "BackoffLimitExceeded"),
        (None, "PodFailurePolicy"),
        ("failed", "PodFailurePolicy"),
        ("blocked", "BackoffLimitExceeded"),
        ("plan-changed", "BackoffLimitExceeded"),
    ]
)
COUNTED = st.sampled_from(["failed", "succeeded", None])


@given(st.lists(COUNTED, max_size=8), st.lists(st.tuples(st.integers(0, 8), FREE), max_size=6))
def test_free_outcomes_never_change_the_count(
    counted: list[str | None], free: list[tuple[int, tuple[str | None, str]]]
) -> None:
    base = [job("apply", i + 1, o, finished=ago(100 - 10 * i)) for i, o in enumerate(counted)]
    extra = [
        job("apply", 100 + k, outcome, reason=reason, finished=ago(100 - 10 * pos + 5))
        for k, (pos, (outcome, reason)) in enumerate(free)
    ]
    assert len(_history(base + extra).failures("apply")) == len(_history(base).failures("apply"))


@given(st.lists(st.sampled_from(["failed", None]), min_size=1, max_size=6))
def test_a_failing_drift_never_delays_an_apply(drift_outcomes: list[str | None]) -> None:
    drifts = [
        job("drift", i + 1, o, finished=ago(seconds=5 + i)) for i, o in enumerate(drift_outcomes)
    ]
    obj = captf(spec={"variables": {"size": 4}})  # inputs differ from the state: apply due
    snap = snapshot.build(obj, [*base_objects(), *drifts])
    decision = decide(snap, NOW)
    assert decision == Run(op="apply", reason="InputsChanged", retry=1, guarded=True)


def test_drift_failures_do_delay_the_next_drift() -> None:
    obj = captf(spec={"drift": {"interval": "1m"}})
    jobs = [
        job("apply", 1, "succeeded", finished=ago(60)),
        job("drift", 1, "failed", finished=ago(seconds=90)),
        job("drift", 2, "failed", finished=ago(seconds=67)),  # past the interval and jitter
    ]
    decision = decide(snapshot.build(obj, [*base_objects(), *jobs]), NOW)
    assert isinstance(decision, Requeue)
    assert decision.reason == "DriftCheckDueBackoff"
    assert decision.op == "drift"
    assert decision.after == 53.0
