"""The runner with real OpenTofu and the real `local` provider; the Kubernetes
calls go to an in-memory fake. The "infrastructure" is files in a temporary
directory, so drift is a file edited or deleted behind the runner's back."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller.core.jobs.job import Outcome
from controller.core.spec.inputs import Inputs
from controller.runner.binaries import runner_environ
from controller.runner.env import RunnerEnv, from_environ
from controller.runner.main import serve
from controller.runner.result import RunnerResult
from tests.runner_fakes import FakeKube, secret, stored_state

pytestmark = pytest.mark.e2e

MODULE = """\
variable "dir" {
  type = string
}
variable "content" {
  type    = string
  default = "hello"
}
variable "note" {
  type    = string
  default = ""
}
variable "slow" {
  type    = bool
  default = false
}

# Every argument of local_file forces a replacement: a new content is destructive.
resource "local_file" "managed" {
  filename = "${var.dir}/managed.txt"
  content  = var.content
}

# terraform_data's input updates in place: a new note is not destructive.
resource "terraform_data" "note" {
  input = var.note
}

resource "terraform_data" "slow" {
  count      = var.slow ? 1 : 0
  depends_on = [local_file.managed]
  provisioner "local-exec" {
    command = "touch ${var.dir}/slow-started && exec sleep 300"
  }
}
"""


class Object:
    """One CAPTF object's runner Jobs, run one at a time as the controller would."""

    def __init__(self, build: Path, tmp_path: Path, module: str = MODULE) -> None:
        self.module = module
        self.kube = FakeKube()
        self.infra = tmp_path / "infra"
        self.infra.mkdir()
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.build = build
        self.jobs = 0
        self.variables: dict[str, Any] = {"dir": str(self.infra)}
        self.inputs = self.set_inputs()

    @property
    def file(self) -> Path:
        return self.infra / "managed.txt"

    def set_inputs(self, **variables: Any) -> Inputs:
        """New durable inputs, as the controller renders them into an immutable Secret."""
        self.variables |= variables
        inputs = Inputs(module={"main.tf": self.module}, variables=dict(self.variables))
        name = f"c-inputs-{inputs.hash8}"
        if name not in self.kube.secrets:
            annotations = {"captf.io/inputs-hash": inputs.hash}
            self.kube.put(secret(name, inputs.secret_data(), annotations))
        self.inputs = inputs
        return inputs

    def env(self, op: str, **extra: str) -> RunnerEnv:
        self.jobs += 1
        job = f"c-{op}-{self.jobs}"
        return from_environ(
            {
                "CAPTF_OP": op,
                "CAPTF_NAMESPACE": "ns",
                "CAPTF_JOB_NAME": job,
                "CAPTF_OBJECT_NAME": "c",
                "CAPTF_OBJECT_KIND": "TerraformCluster",
                "CAPTF_INPUTS_SECRET": f"c-inputs-{self.inputs.hash8}",
                "CAPTF_INPUTS_HASH": self.inputs.hash,
                "CAPTF_STATE_SECRET": "c-state",
                "CAPTF_WORK_DIR": str(self.work),
                "CAPTF_RESULT_FILE": str(self.work / f"{job}.termination-log"),
                **runner_environ(self.build),
                **extra,
            }
        )

    async def run(self, op: str, **extra: str) -> RunnerResult:
        env = self.env(op, **extra)
        async with asyncio.timeout(240):
            result = await serve(env, self.kube)
        reported = orjson.loads(Path(env.result_file).read_bytes())  # noqa: ASYNC240 -- small
        assert reported == orjson.loads(result.to_json())
        return result

    def state(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(stored_state(self.kube, "c-state"))
        return parsed

    def state_annotations(self) -> dict[str, str]:
        return dict(self.kube.secrets["c-state"]["metadata"]["annotations"])

    def resources(self) -> set[str]:
        return {f"{r['type']}.{r['name']}" for r in self.state()["resources"]}


@pytest.fixture
def obj(tofu_build: Path, tmp_path: Path) -> Object:
    return Object(tofu_build, tmp_path)


async def test_apply_creates_state_and_file_then_a_new_variable_reapplies(obj: Object) -> None:
    first = await obj.run("apply")
    assert first.outcome is Outcome.SUCCESS, first.message
    assert obj.file.read_text() == "hello"
    assert obj.resources() == {"local_file.managed", "terraform_data.note"}
    assert obj.state_annotations() == {
        "captf.io/serial": str(obj.state()["serial"]),
        "captf.io/inputs-hash": obj.inputs.hash,
        "captf.io/written-by": "c-apply-1",
    }
    assert first.state_serial == obj.state()["serial"]
    old_serial = obj.state()["serial"]

    obj.set_inputs(content="second")
    second = await obj.run("apply")
    assert second.outcome is Outcome.SUCCESS, second.message
    assert obj.file.read_text() == "second"
    assert second.state_serial is not None
    assert second.state_serial > old_serial
    assert obj.state_annotations()["captf.io/inputs-hash"] == obj.inputs.hash
    assert json.loads(stored_state(obj.kube, f"c-state-{old_serial}"))["serial"] == old_serial


async def test_guarded_replacement_is_blocked_with_nothing_changed(obj: Object) -> None:
    assert (await obj.run("apply")).outcome is Outcome.SUCCESS

    obj.set_inputs(note="in place")  # an update: the guard lets it through
    assert (await obj.run("apply", CAPTF_GUARDED="true")).outcome is Outcome.SUCCESS
    state_before = obj.state()
    applied_hash = obj.inputs.hash

    obj.set_inputs(content="replace me")
    blocked = await obj.run("apply", CAPTF_GUARDED="true")
    assert blocked.outcome is Outcome.BLOCKED
    assert "local_file.managed" in blocked.message
    assert obj.file.read_text() == "hello"
    assert obj.state() == state_before
    assert obj.state_annotations()["captf.io/inputs-hash"] == applied_hash


async def test_drift_is_detected_after_the_file_is_edited(obj: Object) -> None:
    assert (await obj.run("apply")).outcome is Outcome.SUCCESS
    clean = await obj.run("drift")
    assert (clean.outcome, clean.drift) == (Outcome.SUCCESS, False)

    obj.file.write_text("edited by hand")
    drifted = await obj.run("drift")
    assert (drifted.outcome, drifted.drift) == (Outcome.SUCCESS, True)
    assert "local_file.managed" in drifted.message
    assert obj.file.read_text() == "edited by hand"  # a drift check changes nothing

    remediated = await obj.run("apply")
    assert remediated.outcome is Outcome.SUCCESS
    assert obj.file.read_text() == "hello"


async def test_refresh_records_a_deleted_file(obj: Object) -> None:
    assert (await obj.run("apply")).outcome is Outcome.SUCCESS
    obj.file.unlink()
    refreshed = await obj.run("refresh")
    assert refreshed.outcome is Outcome.SUCCESS, refreshed.message
    assert obj.resources() == {"terraform_data.note"}
    assert obj.state_annotations()["captf.io/inputs-hash"] == obj.inputs.hash


async def test_destroy_removes_the_file(obj: Object) -> None:
    assert (await obj.run("apply")).outcome is Outcome.SUCCESS
    destroyed = await obj.run("destroy")
    assert destroyed.outcome is Outcome.SUCCESS, destroyed.message
    assert not obj.file.exists()
    # Destroyed, the state describes nothing: it and its backups are gone.
    assert [n for n in obj.kube.secrets if n.startswith("c-state")] == []


async def test_restore_brings_back_an_earlier_state(obj: Object) -> None:
    assert (await obj.run("apply")).outcome is Outcome.SUCCESS
    first_serial = obj.state()["serial"]
    obj.set_inputs(content="second")
    assert (await obj.run("apply")).outcome is Outcome.SUCCESS
    restored = await obj.run("restore", CAPTF_RESTORE_SERIAL=str(first_serial))
    assert restored.outcome is Outcome.SUCCESS, restored.message
    assert obj.state()["serial"] > first_serial  # serials only grow
    assert obj.resources() == {"local_file.managed", "terraform_data.note"}
    # The restored state records the first content; the file holds the second: drift.
    drift = await obj.run("drift")
    assert drift.drift is True


async def test_approved_plan_applies_only_while_it_still_matches(obj: Object) -> None:
    assert (await obj.run("apply")).outcome is Outcome.SUCCESS
    obj.set_inputs(content="approved")
    planned = await obj.run("plan", CAPTF_PLAN_SECRET="c-plan-1")
    assert (planned.outcome, planned.plan_secret) == (Outcome.SUCCESS, "c-plan-1")
    assert obj.file.read_text() == "hello"  # a plan changes nothing
    # Its summary, from OpenTofu's own JSON: addresses and actions, no value.
    notes = obj.kube.secrets["c-plan-1"]["metadata"]["annotations"]
    summary = orjson.loads(notes["captf.io/plan-summary"])
    assert summary["resources"] == [{"address": "local_file.managed", "action": "replace"}]
    assert summary["counts"] == {"create": 0, "update": 0, "replace": 1, "delete": 0}
    assert "approved" not in notes["captf.io/plan-summary"]

    obj.file.unlink()  # the world moved since the plan was approved
    changed = await obj.run("apply", CAPTF_APPROVED_PLAN_SECRET="c-plan-1")
    assert changed.outcome is Outcome.PLAN_CHANGED
    assert "local_file.managed" in changed.message
    assert not obj.file.exists()

    obj.file.write_text("hello")
    replanned = await obj.run("plan", CAPTF_PLAN_SECRET="c-plan-2")
    assert replanned.outcome is Outcome.SUCCESS
    applied = await obj.run("apply", CAPTF_APPROVED_PLAN_SECRET="c-plan-2")
    assert applied.outcome is Outcome.SUCCESS, applied.message
    assert obj.file.read_text() == "approved"


async def test_a_failing_module_reports_the_error(obj: Object) -> None:
    obj.set_inputs(dir=str(obj.infra / "managed.txt" / "not-a-dir"))
    obj.infra.joinpath("managed.txt").write_text("a file where a directory should be")
    failed = await obj.run("apply")
    assert failed.outcome is Outcome.FAILURE
    assert failed.message.startswith("tofu apply failed (exit 1):")
    assert "Error" in failed.message
    assert len(failed.message.encode()) <= 2048


async def test_sigterm_during_a_slow_apply_saves_state_and_ends_interrupted(obj: Object) -> None:
    assert (await obj.run("apply")).outcome is Outcome.SUCCESS
    serial = obj.state()["serial"]
    obj.set_inputs(content="before the sleep", slow=True)
    started = obj.infra / "slow-started"

    async def terminate_when_started() -> None:
        while not started.exists():  # noqa: ASYNC110 -- another process creates it
            await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = asyncio.create_task(terminate_when_started())
    result = await obj.run("apply")
    await killer
    assert result.outcome is Outcome.INTERRUPTED, result.message
    assert result.exit_code != 0
    # What tofu did before the signal is in the saved state.
    assert obj.file.read_text() == "before the sleep"
    assert result.state_serial == obj.state()["serial"]
    assert obj.state()["serial"] > serial
    managed = next(r for r in obj.state()["resources"] if r["name"] == "managed")
    assert managed["instances"][0]["attributes"]["content"] == "before the sleep"
    # An interrupted apply does not claim the new inputs were applied.
    assert obj.state_annotations()["captf.io/inputs-hash"] != obj.inputs.hash
