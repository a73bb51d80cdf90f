"""The op logic against an in-memory API and a scripted tofu."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller.core.basics.redact import redactor
from controller.core.jobs.job import Outcome
from controller.runner import plans
from controller.runner.env import RunnerEnv, from_environ
from controller.runner.main import report, run_op
from controller.runner.ops import execute
from controller.runner.tofu import Exit
from tests.runner_fakes import FakeKube, data_of, secret, stored_state

HASH = "ab" * 32


def tfstate(serial: int) -> bytes:
    return json.dumps({"version": 4, "serial": serial, "lineage": "L"}).encode()


def plan_json(*changes: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "resource_changes": [
            {"address": a, "change": {"actions": acts, "after": {"v": a}}} for a, acts in changes
        ]
    }


@dataclass
class ScriptedTofu:
    """Plays tofu: each command's exit code, the plan `show` prints, the state
    `apply`/`destroy` leave, and a SIGTERM arriving during one command."""

    work_dir: Path
    plan: dict[str, Any] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    new_state: bytes | None = None
    stderr: str = "Error: something broke\n"
    terminate_during: str | None = None
    calls: list[tuple[str, ...]] = field(default_factory=list)
    terminated: bool = False

    async def run(self, *args: str, capture: bool = False) -> Exit:
        self.calls.append(args)
        cmd = args[0]
        if self.terminated:
            return Exit(-15, "not started")
        if cmd == self.terminate_during:
            self.terminated = True
        code = self.codes.get(cmd, 0)
        if cmd == "plan":
            (self.work_dir / "tfplan").write_bytes(b"binary plan")
            if code == 0 and "-detailed-exitcode" in args and self.plan.get("resource_changes"):
                code = 2
        if cmd in ("apply", "destroy") and self.new_state is not None:
            (self.work_dir / "terraform.tfstate").write_bytes(self.new_state)
        if cmd == "show":
            return Exit(0, "", orjson.dumps(self.plan))
        return Exit(code, self.stderr if code else "")

    def commands(self) -> list[str]:
        return [c[0] for c in self.calls]


def environ(op: str = "apply", **extra: str) -> RunnerEnv:
    return from_environ(
        {
            "CAPTF_OP": op,
            "CAPTF_NAMESPACE": "ns",
            "CAPTF_JOB_NAME": "job",
            "CAPTF_OBJECT_NAME": "c",
            "CAPTF_OBJECT_KIND": "TerraformCluster",
            "CAPTF_INPUTS_SECRET": "c-inputs-abababab",
            "CAPTF_INPUTS_HASH": HASH,
            "CAPTF_STATE_SECRET": "c-state",
            **extra,
        }
    )


@pytest.fixture
def kube() -> FakeKube:
    k = FakeKube()
    k.put(
        secret(
            "c-inputs-abababab",
            {"module.main.tf": b'resource "terraform_data" "x" {}\n', "variables.json": b'{"a":1}'},
            {"captf.io/inputs-hash": HASH},
        )
    )
    return k


def with_state(kube: FakeKube, serial: int, inputs_hash: str = "old") -> None:
    annotations = {"captf.io/serial": str(serial), "captf.io/inputs-hash": inputs_hash}
    kube.put(secret("c-state", {"terraform.tfstate": tfstate(serial)}, annotations))


def plan_secret(plan: dict[str, Any]) -> dict[str, Any]:
    """An approved plan Secret of the object, labelled as the runner labels its plans."""
    found = secret("c-plan", {"plan.json": orjson.dumps(plan)})
    found["metadata"]["labels"]["captf.io/plan-of"] = "c"
    return found


def state_annotations(kube: FakeKube) -> dict[str, str]:
    return dict(kube.secrets["c-state"]["metadata"]["annotations"])


async def test_apply_renders_inputs_and_records_state_with_inputs_hash(
    kube: FakeKube, tmp_path: Path
) -> None:
    tofu = ScriptedTofu(tmp_path, plan=plan_json(("x", ["create"])), new_state=tfstate(1))
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.outcome is Outcome.SUCCESS
    assert result.state_serial == 1
    assert "create x" in result.message
    assert tofu.commands() == ["init", "plan", "show", "apply"]
    assert tofu.calls[-1][-1] == "tfplan"  # applies exactly the plan it checked
    assert (tmp_path / "main.tf").read_text().startswith('resource "terraform_data"')
    assert json.loads((tmp_path / "terraform.tfvars.json").read_text()) == {"a": 1}
    assert state_annotations(kube) == {
        "captf.io/serial": "1",
        "captf.io/inputs-hash": HASH,
        "captf.io/written-by": "job",  # the Job that wrote it
    }


async def test_apply_starts_from_the_stored_state(kube: FakeKube, tmp_path: Path) -> None:
    with_state(kube, 4)
    tofu = ScriptedTofu(tmp_path, new_state=tfstate(5))
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.state_serial == 5
    assert stored_state(kube, "c-state-4") == tfstate(4)


async def test_inputs_hash_mismatch_fails_before_tofu(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path)
    env = environ(CAPTF_INPUTS_HASH="cd" * 32)
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert "cdcd" in result.message
    assert tofu.calls == []


async def test_missing_inputs_secret_fails(kube: FakeKube, tmp_path: Path) -> None:
    del kube.secrets["c-inputs-abababab"]
    result = await execute(environ(), kube, ScriptedTofu(tmp_path), tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert "c-inputs-abababab not found" in result.message


async def test_guarded_destructive_plan_is_blocked_and_changes_nothing(
    kube: FakeKube, tmp_path: Path
) -> None:
    with_state(kube, 4)
    plan = plan_json(("keep", ["update"]), ("gone", ["delete", "create"]))
    tofu = ScriptedTofu(tmp_path, plan=plan, new_state=tfstate(5))
    result = await execute(environ(CAPTF_GUARDED="true"), kube, tofu, tmp_path)
    assert result.outcome is Outcome.BLOCKED
    assert "gone" in result.message
    assert "keep" not in result.message
    assert "apply" not in tofu.commands()
    assert state_annotations(kube)["captf.io/serial"] == "4"


async def test_a_blocked_apply_keeps_the_plan_it_stopped_on_with_its_summary(
    kube: FakeKube, tmp_path: Path
) -> None:
    plan = plan_json(("keep", ["update"]), ("gone", ["delete", "create"]))
    tofu = ScriptedTofu(tmp_path, plan=plan, new_state=tfstate(5))
    env = environ(CAPTF_GUARDED="true", CAPTF_PLAN_SECRET="c-apply-1")
    result = await execute(env, kube, tofu, tmp_path)
    assert (result.outcome, result.plan_secret) == (Outcome.BLOCKED, "c-apply-1")
    kept = kube.secrets["c-apply-1"]
    summary = orjson.loads(kept["metadata"]["annotations"]["captf.io/plan-summary"])
    assert summary["counts"] == {"create": 0, "update": 1, "replace": 1, "delete": 0}
    assert summary["resources"] == [
        {"address": "keep", "action": "update"},
        {"address": "gone", "action": "replace"},
    ]
    assert set(kept["data"]) == {"tfplan", "plan.json"}


async def test_unguarded_destructive_plan_applies(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path, plan=plan_json(("gone", ["delete"])), new_state=tfstate(1))
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.outcome is Outcome.SUCCESS


async def test_approved_plan_that_changed_is_not_applied(kube: FakeKube, tmp_path: Path) -> None:
    approved = plan_json(("x", ["create"]))
    kube.put(plan_secret(approved))
    fresh = plan_json(("x", ["create"]), ("y", ["create"]))
    tofu = ScriptedTofu(tmp_path, plan=fresh, new_state=tfstate(1))
    result = await execute(environ(CAPTF_APPROVED_PLAN_SECRET="c-plan"), kube, tofu, tmp_path)
    assert result.outcome is Outcome.PLAN_CHANGED
    assert "y" in result.message
    assert "apply" not in tofu.commands()
    assert "c-state" not in kube.secrets


async def test_approved_plan_that_still_matches_is_applied(kube: FakeKube, tmp_path: Path) -> None:
    approved = plan_json(("x", ["delete"]))
    kube.put(plan_secret(approved))
    tofu = ScriptedTofu(tmp_path, plan=approved, new_state=tfstate(1))
    result = await execute(environ(CAPTF_APPROVED_PLAN_SECRET="c-plan"), kube, tofu, tmp_path)
    assert result.outcome is Outcome.SUCCESS
    assert tofu.commands()[-1] == "apply"


async def test_missing_approved_plan_fails(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path)
    result = await execute(environ(CAPTF_APPROVED_PLAN_SECRET="gone"), kube, tofu, tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert "gone" in result.message


async def test_failed_apply_saves_partial_state_but_not_the_new_inputs_hash(
    kube: FakeKube, tmp_path: Path
) -> None:
    with_state(kube, 4, inputs_hash="old")
    tofu = ScriptedTofu(tmp_path, codes={"apply": 1}, new_state=tfstate(5))
    tofu.stderr = "progress\n\nError: quota exceeded\n  on main.tf line 1\n"
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert result.state_serial == 5
    assert result.message.endswith("Error: quota exceeded\n  on main.tf line 1")
    assert state_annotations(kube) == {
        "captf.io/serial": "5",
        "captf.io/inputs-hash": "old",
        "captf.io/written-by": "job",
    }


THROTTLED = (
    "╷\n│ Error: creating EC2 VPC: operation error EC2: CreateVpc, https response error "
    "StatusCode: 503, RequestID: 1f, api error RequestLimitExceeded: Request limit exceeded.\n╵\n"
)


@pytest.mark.parametrize(
    ("step", "stderr", "kind", "signal"),
    [
        ("apply", THROTTLED, "cloud-throttled", "aws:RequestLimitExceeded"),
        ("plan", THROTTLED, "cloud-throttled", "aws:RequestLimitExceeded"),
        ("apply", "Error: quota exceeded\n", "apply", None),  # words only: the step's kind
        ("apply", THROTTLED + "Error: Unsupported argument\n", "apply", None),
        # A lock error stays one, whatever else the output says.
        ("plan", "Error: Error acquiring the state lock\n" + THROTTLED, "state-lock", None),
    ],
)
async def test_a_step_failed_on_a_cloud_signal_reports_its_kind_and_the_signal(
    kube: FakeKube, tmp_path: Path, step: str, stderr: str, kind: str, signal: str | None
) -> None:
    with_state(kube, 4)
    tofu = ScriptedTofu(tmp_path, codes={step: 1}, stderr=stderr)
    result = await execute(environ(), kube, tofu, tmp_path)
    error = orjson.loads(result.to_json())["error"]
    assert (error["kind"], error.get("signal")) == (kind, signal)


async def test_sigterm_during_apply_saves_state_and_reports_interrupted(
    kube: FakeKube, tmp_path: Path
) -> None:
    with_state(kube, 4)
    tofu = ScriptedTofu(
        tmp_path, codes={"apply": 1}, new_state=tfstate(5), terminate_during="apply"
    )
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.outcome is Outcome.INTERRUPTED
    assert result.state_serial == 5
    assert state_annotations(kube)["captf.io/serial"] == "5"


async def test_sigterm_during_init_stops_before_any_plan(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path, codes={"init": 1}, terminate_during="init")
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.outcome is Outcome.INTERRUPTED
    assert tofu.commands() == ["init"]


async def test_init_failure_is_reported(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path, codes={"init": 1}, stderr="Error: provider not in mirror\n")
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert "tofu init failed (exit 1)" in result.message
    assert "provider not in mirror" in result.message


async def test_state_conflict_rescues_the_new_state(kube: FakeKube, tmp_path: Path) -> None:
    with_state(kube, 4)

    class Racing(ScriptedTofu):
        async def run(self, *args: str, capture: bool = False) -> Exit:
            if args[0] == "apply":  # another writer updates the state meanwhile
                kube.secrets["c-state"]["metadata"]["resourceVersion"] = "999"
            return await super().run(*args, capture=capture)

    result = await execute(environ(), kube, Racing(tmp_path, new_state=tfstate(5)), tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert "c-state-rescue-job" in result.message
    assert stored_state(kube, "c-state-rescue-job") == tfstate(5)


async def test_drift_reports_changes_as_drift(kube: FakeKube, tmp_path: Path) -> None:
    with_state(kube, 4)
    tofu = ScriptedTofu(tmp_path, plan=plan_json(("local_file.f", ["create"])))
    result = await execute(environ("drift"), kube, tofu, tmp_path)
    assert (result.outcome, result.drift) == (Outcome.SUCCESS, True)
    assert "local_file.f" in result.message
    assert "-detailed-exitcode" in tofu.calls[1]
    assert state_annotations(kube)["captf.io/serial"] == "4"


async def test_no_drift(kube: FakeKube, tmp_path: Path) -> None:
    with_state(kube, 4)
    result = await execute(environ("drift"), kube, ScriptedTofu(tmp_path), tmp_path)
    assert (result.outcome, result.drift) == (Outcome.SUCCESS, False)


async def test_a_drift_check_without_drift_reports_what_it_read(
    kube: FakeKube, tmp_path: Path
) -> None:
    """A plan that found no drift read every resource afresh: its outputs are a reading,
    as a refresh's are (issue 39: it answers a machine's health re-read). A plan with
    changes reports none: what it plans is not what is there."""
    with_state(kube, 4)
    outputs = {"endpoint": {"value": {"host": "h", "port": 6443}}, "health": {"value": None}}
    still = ScriptedTofu(tmp_path, plan={"planned_values": {"outputs": outputs}})
    result = await execute(environ("drift"), kube, still, tmp_path)
    assert (result.outcome, result.drift) == (Outcome.SUCCESS, False)
    assert result.contract is not None
    assert "endpoint" not in result.contract["pending"]  # type: ignore[operator]
    drifted = ScriptedTofu(
        tmp_path,
        plan=plan_json(("local_file.f", ["update"])) | {"planned_values": {"outputs": outputs}},
    )
    result = await execute(environ("drift"), kube, drifted, tmp_path)
    assert (result.drift, result.contract) == (True, None)


async def test_failed_drift_check_is_a_failure(kube: FakeKube, tmp_path: Path) -> None:
    tofu = ScriptedTofu(tmp_path, codes={"plan": 1})
    result = await execute(environ("drift"), kube, tofu, tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert result.drift is None


async def test_plan_writes_plan_secret_owned_by_its_job(kube: FakeKube, tmp_path: Path) -> None:
    plan = plan_json(("x", ["create"]))
    tofu = ScriptedTofu(tmp_path, plan=plan)
    env = environ("plan", CAPTF_PLAN_SECRET="c-plan-1", CAPTF_JOB_UID="job-uid")
    result = await execute(env, kube, tofu, tmp_path)
    assert (result.outcome, result.plan_secret) == (Outcome.SUCCESS, "c-plan-1")
    stored = kube.secrets["c-plan-1"]
    assert data_of(stored, "tfplan") == b"binary plan"
    assert orjson.loads(data_of(stored, "plan.json")) == plan
    owner = stored["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Job", "job", "job-uid")


async def test_refresh_keeps_the_recorded_inputs_hash(kube: FakeKube, tmp_path: Path) -> None:
    with_state(kube, 4, inputs_hash="applied")
    tofu = ScriptedTofu(tmp_path, new_state=tfstate(5))
    result = await execute(environ("refresh"), kube, tofu, tmp_path)
    assert result.outcome is Outcome.SUCCESS
    assert tofu.calls[1][:2] == ("apply", "-refresh-only")
    assert state_annotations(kube) == {
        "captf.io/serial": "5",
        "captf.io/inputs-hash": "applied",
        "captf.io/written-by": "job",
    }


async def test_a_successful_destroy_removes_the_state_and_its_backups(
    kube: FakeKube, tmp_path: Path
) -> None:
    """Destroyed, the state describes nothing: it and its backups go, so nothing is left
    that a later object of the same name could take for live infrastructure."""
    with_state(kube, 4)
    kube.put(secret("c-state-3", {"terraform.tfstate": tfstate(3)}))
    kube.secrets["c-state-3"]["metadata"]["labels"]["captf.io/state-backup-of"] = "c"
    tofu = ScriptedTofu(tmp_path, new_state=tfstate(5))
    result = await execute(environ("destroy"), kube, tofu, tmp_path)
    assert (result.outcome, result.state_serial) == (Outcome.SUCCESS, 5)
    assert sorted(kube.secrets) == ["c-inputs-abababab"]


async def test_a_failed_destroy_keeps_the_state_it_left(kube: FakeKube, tmp_path: Path) -> None:
    with_state(kube, 4)
    tofu = ScriptedTofu(tmp_path, new_state=tfstate(5), codes={"destroy": 1})
    result = await execute(environ("destroy"), kube, tofu, tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert state_annotations(kube)["captf.io/serial"] == "5"


async def test_restore_op(kube: FakeKube, tmp_path: Path) -> None:
    with_state(kube, 4)
    kube.put(secret("c-state-2", {"terraform.tfstate": tfstate(2)}))
    kube.secrets["c-state-2"]["metadata"]["labels"]["captf.io/state-backup-of"] = "c"
    tofu = ScriptedTofu(tmp_path)
    env = environ("restore", CAPTF_RESTORE_SERIAL="2")
    result = await execute(env, kube, tofu, tmp_path)
    assert (result.outcome, result.state_serial) == (Outcome.SUCCESS, 5)
    assert tofu.calls == []
    missing = await execute(environ("restore", CAPTF_RESTORE_SERIAL="3"), kube, tofu, tmp_path)
    assert missing.outcome is Outcome.FAILURE
    assert "c-state-3" in missing.message


async def test_unexpected_error_still_reports_a_result(kube: FakeKube, tmp_path: Path) -> None:
    class Broken(ScriptedTofu):
        async def run(self, *args: str, capture: bool = False) -> Exit:
            raise RuntimeError("boom")

    result = await run_op(environ(), kube, Broken(tmp_path), tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert "boom" in result.message
    report(str(tmp_path / "termination-log"), result, redactor(()))
    reported = orjson.loads((tmp_path / "termination-log").read_text())
    assert reported["outcome"] == "failed"


async def test_a_long_error_is_bounded_with_its_headline(kube: FakeKube, tmp_path: Path) -> None:
    noise = "".join(f"warning {i}\n" for i in range(5000))
    tofu = ScriptedTofu(tmp_path, codes={"plan": 1}, stderr=noise + "Error: the real cause\n")
    result = await execute(environ(), kube, tofu, tmp_path)
    assert result.message.startswith("tofu plan failed (exit 1):\n")
    assert result.message.endswith("Error: the real cause")
    assert len(result.message.encode()) <= 2048
    assert orjson.loads(result.to_json())["message"] == result.message


async def test_an_approved_plan_is_applied_only_with_the_fingerprint_approved(
    kube: FakeKube, tmp_path: Path
) -> None:
    """The plan Secret may have been rewritten since the approver saw the TerraformPlan:
    the fresh plan must have the fingerprint shown, whatever the Secret holds."""
    fresh = plan_json(("x", ["delete"]))
    kube.put(plan_secret(fresh))  # rewritten to match
    shown = plans.summarize(plan_json(("x", ["update"]))).fingerprint
    tofu = ScriptedTofu(tmp_path, plan=fresh, new_state=tfstate(1))
    env = environ(CAPTF_APPROVED_PLAN_SECRET="c-plan", CAPTF_APPROVED_FINGERPRINT=shown)
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.PLAN_CHANGED
    assert f"approved {shown}" in result.message
    assert "apply" not in tofu.commands()
    matching = environ(CAPTF_APPROVED_FINGERPRINT=plans.summarize(fresh).fingerprint)
    applied = await execute(matching, kube, ScriptedTofu(tmp_path, plan=fresh), tmp_path)
    assert applied.outcome is Outcome.SUCCESS
