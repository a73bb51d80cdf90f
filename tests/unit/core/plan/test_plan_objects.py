"""The TerraformPlans' lifecycle, as the pass's plan writes it: created when a Job waits
for a person, approved then applied, changed, superseded, and pruned to a number."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_INPUTS_HASH,
    ANN_PLAN_JOB,
    ANN_PLAN_SUMMARY,
)
from controller.core.decide import snapshot
from controller.core.decide.context import Context
from controller.core.decide.settings import Settings
from controller.core.decide.steps import context_of
from controller.core.plan.plan_objects import PlanWrites, writes_of
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    approval,
    base_objects,
    captf,
    current_hash,
    job,
    secret,
    ts,
)

MANUAL = {"approval": {"mode": "Manual"}, "variables": {"size": 4}}
HASH = current_hash(variables={"size": 4})
SUMMARY = (
    '{"fingerprint": "sha256:ab", "counts": {"create": 1, "delete": 1},'
    ' "resources": [{"address": "a.b", "action": "create"},'
    ' {"address": "c.d", "action": "delete"}]}'
)
PLAN1 = "c1-plan-00000001"


def _plan_job(seq: int = 1, finished: float = 5) -> Json:
    ran = {ANN_INPUTS_HASH: HASH, ANN_ACCOUNTED: "true"}
    return job(
        "plan", seq, result={"planSecret": f"p{seq}"}, finished=ago(finished), annotations=ran
    )


def _plan_secret(seq: int = 1) -> Json:
    kept = secret(f"p{seq}", {"tfplan": "x"})
    kept["metadata"]["annotations"] = {ANN_PLAN_SUMMARY: SUMMARY}
    return kept


def _writes(objects: list[Json], spec: Json | None = None, kept: int = 3) -> PlanWrites:
    obj = captf(spec=spec or MANUAL)
    ctx = context_of(snapshot.build(obj, [*base_objects(), *objects]), NOW)
    assert isinstance(ctx, Context)
    return writes_of(ctx, kept)


def _status(writes: PlanWrites, name: str) -> Json:
    return dict(writes.status)[name]


def test_a_waiting_plan_gets_its_terraform_plan_with_the_summary() -> None:
    writes = _writes([_plan_job(), _plan_secret()])
    [made] = writes.create
    assert made["metadata"]["name"] == PLAN1
    assert made["metadata"]["labels"] == {
        "captf.io/kind": "TerraformCluster",
        "captf.io/name": "c1",
        "captf.io/uid": "uid-c1",
    }
    [owner] = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TerraformCluster",
        "c1",
        "uid-c1",
        True,
    )
    assert made["spec"] == {
        "approved": False,
        "target": {"kind": "TerraformCluster", "name": "c1", "uid": "uid-c1"},
    }
    assert _status(writes, PLAN1) == {
        "inputsHash": HASH,
        "fingerprint": "sha256:ab",
        "counts": {"create": 1, "update": 0, "replace": 0, "delete": 1},
        "resources": [
            {"address": "a.b", "action": "create"},
            {"address": "c.d", "action": "delete"},
        ],
        "phase": "Pending",
    }


def test_nothing_is_written_when_the_plan_shows_its_status_already() -> None:
    first = _writes([_plan_job(), _plan_secret()])
    stored = first.create[0] | {"status": _status(first, PLAN1)}
    stored["metadata"]["creationTimestamp"] = ts(ago(1))
    assert not _writes([_plan_job(), _plan_secret(), stored])


def test_nothing_waits_nothing_is_created() -> None:
    assert not _writes([], spec={"variables": {"size": 4}})


def _approved(**over: Any) -> Json:
    return approval(PLAN1, {"size": 4}, fingerprint="sha256:ab", **over)


@pytest.mark.parametrize(
    ("apply", "phase"),
    [
        (None, "Approved"),  # approved, its apply not created yet
        ("running", "Approved"),
        ("succeeded", "Applied"),
        ("plan-changed", "Changed"),
        ("failed", "Superseded"),
    ],
)
def test_an_approved_plan_follows_its_apply(apply: str | None, phase: str) -> None:
    objects = [_plan_job(), _plan_secret(), _approved()]
    if apply is not None:
        carried = {ANN_PLAN_JOB: PLAN1}
        state = "Running" if apply == "running" else "Failed"
        outcome = None if apply == "running" else apply
        objects.append(job("apply", 1, outcome, state=state, annotations=carried, finished=ago(1)))
    assert _status(_writes(objects), PLAN1)["phase"] == phase


def test_new_inputs_supersede_a_pending_plan() -> None:
    writes = _writes(
        [_plan_job(), _plan_secret(), _approved(approved=False)],
        spec=MANUAL | {"variables": {"size": 5}},
    )
    assert writes.create == ()  # a plan for the new inputs runs first
    assert _status(writes, PLAN1)["phase"] == "Superseded"


def test_a_newer_plan_supersedes_an_older_one() -> None:
    # Plan 1 waited, unapproved; its apply's wait ended and plan 2 is what waits now.
    old = _approved(approved=False)
    objects = [_plan_job(1, finished=30), _plan_secret(1), old, _plan_job(2), _plan_secret(2)]
    writes = _writes(objects)
    assert [p["metadata"]["name"] for p in writes.create] == ["c1-plan-00000002"]
    assert _status(writes, PLAN1)["phase"] == "Superseded"
    assert _status(writes, "c1-plan-00000002")["phase"] == "Pending"


def test_a_finished_phase_is_never_rewritten() -> None:
    applied = _approved(phase="Applied")
    # Its Jobs pruned, the plan waiting again from scratch would not change it.
    writes = _writes([applied])
    assert PLAN1 not in dict(writes.status)


def _finished(seq: int, minutes: float) -> Json:
    done = approval(f"c1-plan-{seq:08x}", {"size": 4}, phase="Superseded")
    done["metadata"]["creationTimestamp"] = ts(NOW - timedelta(minutes=minutes))
    return done


@pytest.mark.parametrize(
    ("count", "kept", "pruned"), [(2, 3, []), (5, 3, [10, 11]), (4, 0, [10, 11, 12, 13])]
)
def test_finished_plans_are_pruned_oldest_first(count: int, kept: int, pruned: list[int]) -> None:
    # Created 10 (oldest) ... 10 + count - 1 (newest).
    objects = [_finished(10 + i, minutes=100 - i) for i in range(count)]
    writes = _writes(objects, spec={"variables": {"size": 4}}, kept=kept)
    assert writes.delete == tuple(f"c1-plan-{n:08x}" for n in pruned)


def test_a_pass_keeps_the_jobs_of_plans_not_finished_and_prunes_by_the_setting() -> None:
    # Three finished plans, and plan 1 stored as Pending (older than plan 2, which waits
    # now): plan 1 is superseded by this pass and is the newest finished, so kept_plans=1
    # deletes the three others; its Job stays this pass, though the history limit alone
    # would prune it.
    objects = [_finished(10 + i, minutes=100 - i) for i in range(3)]
    objects += [_plan_job(1, finished=30), _approved(approved=False), _plan_job(2), _plan_secret(2)]
    obj = captf(spec=MANUAL | {"jobs": {"successfulJobsHistoryLimit": 1}})
    snap = snapshot.build(obj, [*base_objects(), *objects])
    done = plan_pass(snap, NOW, settings=Settings(kept_plans=1))
    assert done.plan_writes.delete == ("c1-plan-0000000a", "c1-plan-0000000b", "c1-plan-0000000c")
    assert dict(done.plan_writes.status)[PLAN1]["phase"] == "Superseded"
    assert PLAN1 not in done.prune


@pytest.mark.parametrize(
    ("secret_there", "summary", "fingerprint"),
    [
        (True, True, "sha256:ab"),  # the runner's summary
        (True, False, "unknown"),  # a runner from before summaries: approvable, blind
        (False, False, None),  # not seen yet: nothing to approve until it is
    ],
)
def test_the_fingerprint_shown_comes_from_the_plan_secret(
    secret_there: bool, summary: bool, fingerprint: str | None
) -> None:
    kept = _plan_secret() if summary else secret("p1", {"tfplan": "x"})
    objects = [_plan_job(), *([kept] if secret_there else [])]
    # A Manual plan whose Secret is not there reads as a failure; a blocked apply waits.
    if not secret_there:
        objects = [job("apply", 1, "blocked", result={"planSecret": "p1"}, finished=ago(2))]
    writes = _writes(objects, spec=None if secret_there else {"variables": {"size": 4}})
    [(_, status)] = writes.status
    assert status.get("fingerprint") == fingerprint
