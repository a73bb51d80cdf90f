"""DecideOp where an operator's checks found it wrong: a time zone that is a folder of the
database, a drift found in the second of the last apply, an Auto-mode blocked apply
whose wait a plan ended. Each case failed before its fix in controller/core."""

from __future__ import annotations

import pytest

from controller.core.basics.names import ANN_DRIFT_REMEDIATION
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.steps import decide
from runtime.jsonobj import Json
from tests.builders import NOW, ago, approval, base_objects, captf, decided, job, secret


def _with_zone(zone: str) -> Json:
    windows = [{"days": ["Mon"], "start": "22:00", "duration": "2h", "timeZone": zone}]
    obj = captf(spec={"changeWindows": windows})
    return to_json(decide(snapshot.build(obj, base_objects()), NOW), verbose=True)


@pytest.mark.parametrize(
    ("zone", "why"),
    [
        # Folders of the time-zone database: ZoneInfo raised IsADirectoryError.
        ("America/Indiana", "is a folder of the time-zone database, not a zone"),
        ("America/Argentina", "is a folder of the time-zone database, not a zone"),
        ("Etc", "is a folder of the time-zone database, not a zone"),
        # Other names the CRD's pattern admits and no zone is.
        ("Mars/Olympus_Mons", "unknown time zone"),
        ("posix", "unknown time zone"),
    ],
)
def test_a_zone_that_cannot_be_loaded_is_an_invalid_policy(zone: str, why: str) -> None:
    out = _with_zone(zone)
    message = out.pop("message")
    assert out == {"action": "requeue", "reason": "JobPolicyInvalid", "after": 600.0}
    assert repr(zone) in message
    assert why in message
    assert message.startswith("spec.changeWindows[0].timeZone")


@pytest.mark.parametrize("zone", ["zone.tab", "tzdata.zi", "leapseconds", "a/../b", "/etc/passwd"])
def test_a_data_file_or_path_is_not_a_zone_either(zone: str) -> None:
    # The CRD's pattern refuses these; a snapshot file or an older object may hold them.
    out = _with_zone(zone)
    assert (out["action"], out["reason"], out["after"]) == ("requeue", "JobPolicyInvalid", 600.0)
    assert repr(zone) in out["message"]


def test_drift_found_in_the_second_of_the_last_apply_is_remediated() -> None:
    # The apply succeeded at 13:56:23; a drift check was created at 13:56:23, finished
    # at 13:56:23 and found drift. Only the finish times were compared: a tie read as
    # "applied since", and the drift stayed hidden (idle).
    second = ago(seconds=30)
    apply = job("apply", 1, "succeeded", finished=second, created=ago(seconds=50))
    check = job("drift", 1, "succeeded", finished=second, created=second, result={"drift": True})
    obj = captf(spec={"drift": {"remediate": True}})
    assert decided(obj, [*base_objects(), apply, check]) == {
        "action": "run",
        "op": "apply",
        "reason": "DriftRemediation",
        "retry": 1,
    }


def test_a_remediation_in_its_checks_second_ends_the_drift() -> None:
    # The other side of the tie: the remediation succeeded in the second its check
    # finished, created in that second too. It follows the check (it exists only because
    # the check found drift), so nothing is pending.
    second = ago(seconds=30)
    check = job("drift", 1, "succeeded", finished=second, created=second, result={"drift": True})
    fix = job(
        "apply",
        1,
        "succeeded",
        finished=second,
        created=second,
        annotations={ANN_DRIFT_REMEDIATION: "true"},
    )
    obj = captf(spec={"drift": {"remediate": True}})
    assert decided(obj, [*base_objects(), check, fix]) == {"action": "idle"}


def test_a_failure_before_the_check_in_its_second_does_not_count_toward_the_cap() -> None:
    # A remediation that failed in the second a later check was created and finished:
    # created before the check, it came before it, and the check starts a new count.
    second = ago(seconds=30)
    failed = job(
        "apply",
        1,
        "failed",
        finished=second,
        created=ago(seconds=40),
        annotations={ANN_DRIFT_REMEDIATION: "true"},
    )
    check = job("drift", 1, "succeeded", finished=second, created=second, result={"drift": True})
    obj = captf(spec={"drift": {"remediate": True}, "jobs": {"failedJobsHistoryLimit": 1}})
    out = decided(obj, [*base_objects(), failed, check])
    # Not capped: the remediation is due (and waits out the apply's backoff).
    assert (out["action"], out.get("op"), out["reason"]) == (
        "requeue",
        "apply",
        "DriftRemediationBackoff",
    )


def _blocked_then_planned(mode: str, *, approve: str | None = None) -> Json:
    """An apply blocked by the guard, then a plan created after it (made in Manual mode,
    before a switch to Auto)."""
    blocked = job("apply", 1, "blocked", finished=ago(10), created=ago(12))
    plan = job("plan", 1, "succeeded", result={"planSecret": "p1"}, finished=ago(5))
    obj = captf(spec={"approval": {"mode": mode}})
    approved = [approval(approve)] if approve else []
    others = [*base_objects(), secret("p1", {"tfplan": "x"}), blocked, plan, *approved]
    return decided(obj, others)


def test_auto_a_blocked_apply_waits_whatever_plans_exist() -> None:
    # Switched from Manual to Auto while the apply waited: the plan made after it says
    # nothing about its approval. Before, the plan ended the wait and the apply was idle.
    assert _blocked_then_planned("Auto") == {
        "action": "requeue",
        "reason": "WaitingForApproval",
        "after": 600.0,
    }


def test_auto_approving_the_blocked_apply_still_ends_its_wait() -> None:
    blocked_name = job("apply", 1)["metadata"]["name"]
    assert _blocked_then_planned("Auto", approve=blocked_name) == {"action": "idle"}


def test_manual_a_plan_after_the_blocked_apply_still_supersedes_its_wait() -> None:
    # The documented Manual rule stays: the wait moved on to the plan, which waits for
    # its own approval.
    plan_name = job("plan", 1)["metadata"]["name"]
    assert _blocked_then_planned("Manual") == {
        "action": "requeue",
        "reason": "WaitingForApproval",
        "after": 600.0,
    }
    assert _blocked_then_planned("Manual", approve=plan_name)["action"] == "idle"
