"""Properties of DecideOp over arbitrary Job histories: the output always has one of the
spec's shapes, the order of objects in a snapshot never matters, and a wait ends when
it says it does."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_DRIFT_REMEDIATION, Op, Reason
from runtime.jsonobj import Json
from tests.builders import NOW, ago, base_objects, captf, decided, job

REASONS = {r.value for r in Reason}
TRIGGERS = {
    Reason.DELETING,
    Reason.INTERRUPTED_APPLY,
    Reason.INPUTS_CHANGED,
    Reason.LAST_APPLY_FAILED,
    Reason.NO_STATE,
    Reason.STATE_WITHOUT_INPUTS_HASH,
    Reason.DRIFT_REMEDIATION,
    Reason.DRIFT_CHECK_DUE,
    Reason.REFRESH_DUE,
}

JOB = st.tuples(
    st.sampled_from([Op.APPLY, Op.DRIFT, Op.REFRESH, Op.PLAN]),
    st.sampled_from(["succeeded", "failed", "interrupted", "blocked", "plan-changed", None, "?"]),
    st.sampled_from(["Complete", "Failed"]),
    st.sampled_from(["BackoffLimitExceeded", "DeadlineExceeded", "PodFailurePolicy"]),
    st.integers(min_value=0, max_value=7200),  # finished this many seconds ago
    st.booleans(),  # a drift remediation
    st.booleans(),  # drift found (drift Jobs)
)
SPEC = st.fixed_dictionaries(
    {
        "variables": st.sampled_from([{"size": 3}, {"size": 4}]),
        "jobs": st.fixed_dictionaries(
            {"image": st.just("captf:dev"), "failedJobsHistoryLimit": st.integers(0, 6)}
        ),
        "drift": st.fixed_dictionaries(
            {"interval": st.sampled_from(["", "10m", "1h"]), "remediate": st.booleans()}
        ),
        "refresh": st.fixed_dictionaries({"interval": st.sampled_from(["", "30m"])}),
        "approval": st.fixed_dictionaries({"mode": st.sampled_from(["Auto", "Manual"])}),
    }
)


def _jobs(specs: list[tuple[str, Any, str, str, int, bool, bool]]) -> list[Json]:
    out = []
    for seq, (op, outcome, state, reason, seconds, remediation, drift) in enumerate(specs, 1):
        notes = {ANN_DRIFT_REMEDIATION: "true"} if remediation and op == Op.APPLY else {}
        result: Json = {"drift": drift} if op == Op.DRIFT else {}
        if op == Op.PLAN:
            result["planSecret"] = "c1-plan"
        out.append(
            job(
                op,
                seq,
                outcome,
                state=state,
                reason=reason,
                finished=ago(seconds=seconds),
                annotations=notes,
                result=result,
            )
        )
    return out


def _decision(spec: Json, others: list[Json], at: Any = NOW) -> Json:
    return decided(captf(spec=spec), others, at)


def _check_shape(out: Json) -> None:
    if out["action"] == "run":
        assert set(out) == {"action", "op", "reason", "retry"}
        assert out["op"] in {o.value for o in Op}
        assert out["reason"] in TRIGGERS
        assert out["retry"] >= 1
    elif out["action"] == "requeue":
        assert set(out) <= {"action", "op", "reason", "after", "missedWindow"}
        reason = out["reason"]
        assert reason in REASONS or reason.removesuffix("Backoff") in TRIGGERS
        if reason.endswith("Backoff"):
            assert out["op"]
            assert 0 < out["after"] <= 600.0
        assert 0 <= out["after"] <= 600.0
    else:
        assert out["action"] == "idle"
        assert set(out) <= {"action", "after", "reason"}
        assert out.get("after", 0.0) >= 0.0


@settings(max_examples=300, deadline=None)
@given(SPEC, st.lists(JOB, max_size=8), st.randoms(use_true_random=False))
def test_any_history_decides_in_a_spec_shape_whatever_the_order(
    spec: Json, specs: list[Any], rng: random.Random
) -> None:
    others = [*base_objects(), *_jobs(specs)]
    out = _decision(spec, others)
    _check_shape(out)
    shuffled = list(others)
    rng.shuffle(shuffled)
    assert _decision(spec, shuffled) == out


@settings(max_examples=300, deadline=None)
@given(SPEC, st.lists(JOB, max_size=8))
def test_a_backoff_or_idle_wait_ends_when_it_says(spec: Json, specs: list[Any]) -> None:
    others = [*base_objects(), *_jobs(specs)]
    out = _decision(spec, others)
    waiting = out["action"] == "idle" or out["reason"].endswith("Backoff")
    if not waiting or "after" not in out:
        return
    later = _decision(spec, others, NOW + timedelta(seconds=out["after"]))
    if out["action"] == "idle":
        # Intervals here are at least 10m, so a due check's backoff (at most 10m from
        # its newest failure, which is the check's anchor) is over by then.
        assert later["action"] == "run"
        assert later["op"] in (Op.DRIFT, Op.REFRESH)
    else:
        assert later.get("reason") != out["reason"] or later.get("op") != out["op"]
