"""`captf get`'s rows and table, and `captf plan show`'s plan text: pure, no cluster."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cli.people import rows, table
from controller.cli.people.plan_text import SENSITIVE, UNKNOWN, render_plan
from controller.core.basics.names import ANN_RETRY, CLUSTER, MACHINE, POOL
from tests.builders import NOW, ago, captf, job, ts

TOFU_ERROR = (
    "tofu apply failed (exit 1):\n"
    "Error: local-exec provisioner error\n"
    "\n"
    "  with terraform_data.flaky,\n"
    "  on main.tf line 5:\n"
    "simulated cloud API error: throttled (attempt 2)\n"
)


def _backing_off() -> rows.Row:
    status = {
        "conditions": [{"type": "Ready", "status": "False", "reason": "InputsChanged"}],
        "next": {
            "op": "apply",
            "reason": "InputsChangedBackoff",
            "at": ts(NOW + timedelta(seconds=90)),
        },
        "failures": {"apply": {"count": 2, "lastFailedAt": ts(ago(minutes=1))}},
        "lastRun": {
            "job": "c1-apply-00000002",
            "op": "apply",
            "result": "failed",
            "errorKind": "apply",
            "summary": "local-exec provisioner error",
            "steps": [{"name": "init", "exitCode": 0, "seconds": 1}],
        },
    }
    jobs = [
        job("apply", 1, "failed", finished=ago(minutes=3), result={"message": "first"}),
        job("apply", 2, "failed", finished=ago(minutes=1), result={"message": TOFU_ERROR}),
    ]
    return rows.row_of(captf(status=status), jobs)


def test_a_backing_off_object_reads_its_wait_attempts_and_newest_error() -> None:
    row = _backing_off()
    assert (row.ready, row.op, row.reason, row.attempts) == (
        "False",
        "apply",
        "InputsChangedBackoff",
        2,
    )
    assert row.retry_at == NOW + timedelta(seconds=90)
    assert row.last_error.startswith("Job c1-apply-00000002 failed: tofu apply failed")


def test_a_running_job_gives_the_op_and_its_retry_number() -> None:
    running = job("apply", 3, None, state="Running", annotations={ANN_RETRY: "3"})
    status = {"activeJob": running["metadata"]["name"], "next": {"reason": "JobRunning"}}
    row = rows.row_of(captf(status=status), [running])
    assert (row.op, row.attempts, row.reason) == ("apply", 3, "JobRunning")


def test_an_error_resolved_by_a_success_is_not_the_last_error() -> None:
    jobs = [
        job("apply", 1, "failed", finished=ago(minutes=5), result={"message": "boom"}),
        job("apply", 2, "succeeded", finished=ago(minutes=1)),
    ]
    assert rows.row_of(captf(), jobs).last_error == ""


def test_the_newest_unresolved_error_across_ops_wins() -> None:
    jobs = [
        job("apply", 1, "failed", finished=ago(minutes=5), result={"message": "apply broke"}),
        job("drift", 1, "failed", finished=ago(minutes=1), result={"message": "drift broke"}),
    ]
    assert rows.last_error(jobs).endswith("drift broke")


def test_the_table_lines_up_like_kubectl_get() -> None:
    idle = rows.row_of(
        captf(
            POOL,
            "workers",
            status={
                "conditions": [{"type": "Ready", "status": "True"}],
                "next": {"reason": "Idle"},
            },
        ),
        [],
    )
    text = table.render([_backing_off(), idle], NOW, namespaces=True, kinds=True)
    lines = text.splitlines()
    assert lines[0].split() == [
        "NAMESPACE",
        "NAME",
        "CLUSTER",
        "MACHINE",
        "READY",
        "OP",
        "REASON",
        "RETRY",
        "AT",
        "ATTEMPTS",
        "SOURCE",
        "LAST",
        "RUN",
        "LAST",
        "ERROR",
    ]
    # Every column starts at the same offset on every line.
    start = lines[0].index("READY")
    assert lines[1][start:].startswith("False")
    assert lines[2][start:].startswith("True")
    assert "12:01:30 (in 1m30s)" in lines[1]
    assert "apply failed (apply)" in lines[1]
    assert lines[1].endswith(
        "Job c1-apply-00000002 failed: tofu apply failed (exit 1): "
        "simulated cloud API error: throttled (attempt 2)"
    )
    assert lines[2].split()[:8] == [
        "default",
        "terraformmachinepool/workers",
        "c1",
        "workers",
        "True",
        "-",
        "Idle",
        "-",
    ]


def test_the_last_error_is_one_line_with_the_cause_and_is_redacted() -> None:
    text = table.render([_backing_off()], NOW, clean=lambda s: s.replace("throttled", "[REDACTED]"))
    assert len(text.splitlines()) == 2
    assert "throttled" not in text


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("plain", "plain"),
        (
            "tofu apply failed (exit 1):\nError: x\n\ncause here\n",
            "tofu apply failed (exit 1): cause here",
        ),
        ("  spaced   out  ", "spaced out"),
        ("\n\n", "-"),
        ("x" * 130, "x" * 119 + "…"),
    ],
)
def test_one_line(message: str, expected: str) -> None:
    assert table.one_line(message) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (59.9, "59s"),
        (60, "1m"),
        (90, "1m30s"),
        (3600, "1h"),
        (3720, "1h2m"),
        (86400, "1d"),
        (90000, "1d1h"),
        (-5, "0s"),
    ],
)
def test_human_duration(seconds: float, expected: str) -> None:
    assert table.human_duration(seconds) == expected


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        (90, "12:01:30 (in 1m30s)"),
        (-120, "11:58:00 (2m ago)"),
        (0.5, "12:00:00 (now)"),
        (86400 * 2, "2026-06-03 12:00 (in 2d)"),
    ],
)
def test_countdown(offset: float, expected: str) -> None:
    assert table.countdown(NOW + timedelta(seconds=offset), NOW) == expected
    assert table.countdown(None, NOW) == "-"


@given(st.text(max_size=300))
def test_one_line_is_always_one_bounded_line(text: str) -> None:
    line = table.one_line(text)
    assert "\n" not in line
    assert "\r" not in line
    assert 0 < len(line) <= table.ERROR_WIDTH


def test_each_row_names_its_cluster_and_a_member_its_machine() -> None:
    cluster = rows.row_of(captf(CLUSTER, "demo"), [])
    machine = rows.row_of(captf(MACHINE, "demo-md-0-x", cluster="demo"), [])
    orphan = rows.row_of(captf(MACHINE, "lone", owner=None, cluster=None), [])
    assert (cluster.cluster, cluster.machine) == ("demo", "")
    assert (machine.cluster, machine.machine) == ("demo", "demo-md-0-x")
    assert (orphan.cluster, orphan.machine) == ("", "")
    lines = table.render([cluster, machine, orphan], NOW).splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["NAME", "CLUSTER", "MACHINE"],
        ["demo", "demo", "-"],
        ["demo-md-0-x", "demo", "demo-md-0-x"],
        ["lone", "-", "-"],
    ]
    assert rows.to_json(machine, NOW)["machine"] == "demo-md-0-x"
    assert rows.to_json(cluster, NOW)["machine"] is None


def test_json_row_keeps_the_whole_error_and_the_seconds_left() -> None:
    out = rows.to_json(_backing_off(), NOW)
    assert out["retryInSeconds"] == 90.0
    assert out["retryAt"] == "2026-06-01T12:01:30Z"
    assert "simulated cloud API error: throttled (attempt 2)" in out["lastError"]
    assert out["lastRun"] == {
        "job": "c1-apply-00000002",
        "op": "apply",
        "result": "failed",
        "errorKind": "apply",
        "summary": "local-exec provisioner error",
    }
    idle = rows.to_json(rows.row_of(captf(), []), NOW)
    assert idle["lastRun"] is None


PLAN = {
    "resource_changes": [
        {"address": "terraform_data.same", "change": {"actions": ["no-op"]}},
        {
            "address": "terraform_data.new",
            "change": {
                "actions": ["create"],
                "before": None,
                "after": {"input": 2},
                "after_unknown": {"id": True},
            },
        },
        {
            "address": "aws_db.main",
            "change": {
                "actions": ["update"],
                "before": {"size": 1, "password": "hunter2", "tags": {"a": "b"}},
                "after": {"size": 2, "password": "hunter3", "tags": {"a": "b"}},
                "before_sensitive": {"password": True},
                "after_sensitive": {"password": True},
            },
        },
        {
            "address": "terraform_data.old",
            "change": {
                "actions": ["delete", "create"],
                "before": {"input": "x"},
                "after": {"input": "y"},
            },
        },
    ]
}


def test_a_plan_in_human_form() -> None:
    lines = render_plan(PLAN)
    text = "\n".join(lines)
    assert "terraform_data.same" not in text
    assert "  + create  terraform_data.new" in lines
    assert f"      id: null -> {UNKNOWN}" in lines
    assert "      size: 1 -> 2" in lines
    assert f"      password: {SENSITIVE}" in lines
    assert "hunter" not in text
    assert "tags" not in text  # unchanged
    assert "  -/+ replace terraform_data.old" in lines
    assert lines[-1] == "Plan: 2 to add, 1 to change, 1 to destroy."


def test_a_wholly_sensitive_resource_shows_no_value() -> None:
    plan = {
        "resource_changes": [
            {
                "address": "x.y",
                "change": {
                    "actions": ["update"],
                    "before": {"k": "old"},
                    "after": {"k": "new"},
                    "after_sensitive": True,
                },
            }
        ]
    }
    text = "\n".join(render_plan(plan))
    assert "old" not in text
    assert "new" not in text


def test_an_empty_plan_says_so() -> None:
    assert render_plan({"resource_changes": []})[0].startswith("No changes.")


def test_the_last_error_goes_through_the_job_redactor() -> None:
    from controller.core.basics.redact import REDACTED, redactor

    jobs = [job("apply", 1, "failed", result={"message": "auth failed for token hunter2-xyz"})]
    row = rows.row_of(captf(), jobs, lambda _job: redactor(["hunter2-xyz"]))
    assert "hunter2-xyz" not in row.last_error
    assert row.last_error.endswith(f"auth failed for token {REDACTED}")


def test_a_destroy_error_shows_from_status_once_its_jobs_are_pruned() -> None:
    # status.failures.<op>.message keeps a failing destroy's error visible in LAST ERROR.
    obj = captf()
    obj["status"] = {
        "failures": {
            "apply": {"count": 1, "lastFailedAt": ts(ago(90)), "message": "old apply error"},
            "destroy": {"count": 4, "lastFailedAt": ts(ago(2)), "message": "tofu destroy failed"},
        }
    }
    assert rows.row_of(obj, []).last_error == "tofu destroy failed"
    assert rows.status_error({}) == ""


def test_an_identity_refusal_is_the_error_shown_first() -> None:
    refused = {
        "type": "IdentityAllowed",
        "status": "False",
        "reason": "NamespaceNotAllowed",
        "message": "TerraformClusterIdentity aws does not allow namespace team-b",
    }
    status = {
        "next": {"reason": "CredentialsNotReady", "at": ts(NOW)},
        "conditions": [refused],
        "failures": {"apply": {"count": 1, "lastFailedAt": ts(ago(5)), "message": "old failure"}},
    }
    row = rows.row_of(captf(status=status), [])
    assert row.reason == "CredentialsNotReady"
    assert row.last_error == (
        "NamespaceNotAllowed: TerraformClusterIdentity aws does not allow namespace team-b"
    )
    allowed = {**status, "conditions": [refused | {"status": "True", "reason": "IdentityAllowed"}]}
    assert rows.row_of(captf(status=allowed), []).last_error == "old failure"


def test_a_job_that_cannot_start_shows_its_cause_instead_of_running() -> None:
    cause = (
        'Job c1-apply-1 cannot start: pods "x" is forbidden: serviceaccount "deployer" not found'
    )
    waiting = {"type": "Waiting", "status": "True", "reason": "JobCannotStart", "message": cause}
    status = {"next": {"reason": "JobCannotStart"}, "conditions": [waiting]}
    row = rows.row_of(captf(status=status), [])
    assert (row.reason, row.last_error) == ("JobCannotStart", cause)
    # Any other wait keeps the Waiting message out of the error column.
    other = {"next": {"reason": "JobRunning"}, "conditions": [waiting | {"reason": "JobRunning"}]}
    assert rows.row_of(captf(status=other), []).last_error == ""


@pytest.mark.parametrize(
    ("spec", "status", "cell"),
    [
        ({"source": {"configMapRef": {"name": "mod"}}}, {}, "configmap/mod"),
        ({"source": {"image": "r.example/m:1"}}, {}, "image@unpinned"),
        (
            {"source": {"image": "r.example/m:1"}},
            {"image": {"reference": "r.example/m:1", "digest": "sha256:" + "ab" * 32}},
            "image@sha256:abababababab",
        ),
        ({}, {}, ""),
    ],
)
def test_the_source_column_shows_the_shape_and_the_pinned_digest(
    spec: dict[str, Any], status: dict[str, Any], cell: str
) -> None:
    obj = captf(status=status)
    obj["spec"] = {k: v for k, v in obj["spec"].items() if k not in ("source", "module")} | spec
    row = rows.row_of(obj, [])
    assert row.source == cell
    assert rows.to_json(row, NOW)["image"] == (status.get("image") or None)
    line = table.render([row], NOW).splitlines()[1]
    assert (cell or "-") in line.split()


@pytest.mark.parametrize(
    ("last_run", "cell"),
    [
        (None, "-"),
        ({"op": "apply", "result": "succeeded"}, "apply succeeded"),
        (
            {"op": "apply", "result": "failed", "errorKind": "state-lock"},
            "apply failed (state-lock)",
        ),
        (
            {
                "op": "refresh",
                "result": "failed",
                "errorKind": "cloud-throttled",
                "signal": "aws:RequestLimitExceeded",
            },
            "refresh failed (cloud-throttled: aws:RequestLimitExceeded)",
        ),
    ],
)
def test_the_last_run_cell_names_the_cloud_signal_behind_a_cloud_error(
    last_run: dict[str, str] | None, cell: str
) -> None:
    assert rows.last_run_cell(last_run) == cell
    if last_run is not None:
        status = {"lastRun": last_run | {"job": "j", "finishedAt": ts(NOW)}}
        shown = rows.row_of(captf(status=status), []).last_run
        assert shown is not None
        assert shown.get("signal") == last_run.get("signal")


def test_wide_adds_the_newest_plans_changes_and_the_policy_verdict() -> None:
    status = {
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "InputsChanged"},
            {
                "type": "PolicyCompliant",
                "status": "False",
                "reason": "PolicyDenied",
                "message": "m",
            },
        ],
        "next": {"op": "apply", "reason": "PolicyDenied", "at": ts(NOW + timedelta(seconds=600))},
        "lastRun": {
            "job": "c1-apply-00000001",
            "op": "apply",
            "result": "policy-denied",
            "changes": {
                "create": 2,
                "update": 0,
                "replace": 1,
                "delete": 0,
                "addresses": {"replace": ["terraform_data.group"]},
            },
        },
    }
    row = rows.row_of(captf(status=status), [])
    text = table.render([row], NOW, wide=True)
    header, line = text.splitlines()
    assert header.split()[-2:] == ["CHANGES", "POLICY"]
    assert line.split()[-5:] == ["+2", "~0", "-/+1", "-0", "PolicyDenied"]
    assert "CHANGES" not in table.render([row], NOW)
    shown = rows.to_json(row, NOW)
    assert shown["changes"]["addresses"] == {"replace": ["terraform_data.group"]}
    assert shown["policy"]["reason"] == "PolicyDenied"
    # An object no run has planned for, and no policy judged.
    bare = rows.row_of(captf(status={}), [])
    assert table.render([bare], NOW, wide=True).splitlines()[1].split()[-2:] == ["-", "-"]
