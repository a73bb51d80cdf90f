"""What the runner reports about a run: its steps, error kind and summary, and the
size policy that keeps all of it inside a termination message."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.jobs.cloud_signals import SIGNALS, CloudKind
from controller.core.jobs.job import Outcome
from controller.core.jobs.run_report import CLOUD_KINDS, ERROR_KINDS, SUMMARY_LIMIT, ErrorKind
from controller.core.jobs.termination import result_of
from controller.runner.main import run_op, version_of
from controller.runner.result import MESSAGE_FLOOR, RunnerResult, Step
from controller.runner.steps import Recorder
from controller.runner.tofu import Exit
from tests.runner_fakes import FakeKube
from tests.unit.runner.test_runner_ops import ScriptedTofu, environ, kube, plan_json, tfstate

__all__ = ["kube"]  # the fixture, shared with test_runner_ops


class Clock:
    """Each reading is one and a half seconds after the last."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.5
        return self.now


async def test_every_command_is_a_step_with_its_exit_code_and_seconds(
    kube: FakeKube, tmp_path: Path
) -> None:
    tofu = ScriptedTofu(tmp_path, plan=plan_json(("x", ["create"])), new_state=tfstate(1))
    recorder = Recorder(tofu, clock=Clock())
    result = await run_op(environ(), kube, recorder, tmp_path)
    assert result.outcome is Outcome.SUCCESS
    assert result.error_kind is None
    assert recorder.steps == [
        Step("init", 0, 1.5),
        Step("plan", 0, 1.5),
        Step("show", 0, 1.5),
        Step("apply", 0, 1.5),
    ]


async def test_a_refresh_is_named_refresh_not_apply(kube: FakeKube, tmp_path: Path) -> None:
    recorder = Recorder(ScriptedTofu(tmp_path), clock=Clock())
    await run_op(environ("refresh"), kube, recorder, tmp_path)
    assert [s.name for s in recorder.steps] == ["init", "refresh"]


@pytest.mark.parametrize(
    ("op", "failing", "stderr", "kind", "summary"),
    [
        ("apply", "init", "Error: Failed to query available provider packages\n", "init", None),
        ("apply", "plan", 'Error: Invalid value for variable "size"\n', "plan", None),
        ("apply", "apply", "│ Error: creating instance i-0abc123: quota 42\n", "apply", None),
        ("destroy", "destroy", "Error: deleting bucket b-1: BucketNotEmpty\n", "destroy", None),
        ("refresh", "apply", "Error: reading thing\n", "refresh", "reading thing"),
        ("apply", "apply", "Error: Error acquiring the state lock\n", "state-lock", None),
        ("apply", "apply", "panic: no headline at all\n", "apply", "tofu apply failed"),
    ],
)
async def test_a_failed_step_names_its_error_kind_and_a_summary_without_values(
    kube: FakeKube,
    tmp_path: Path,
    op: str,
    failing: str,
    stderr: str,
    kind: str,
    summary: str | None,
) -> None:
    tofu = ScriptedTofu(tmp_path, codes={failing: 1}, stderr=stderr, new_state=tfstate(1))
    recorder = Recorder(tofu, clock=Clock())
    result = await run_op(environ(op), kube, recorder, tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert result.error_kind == ErrorKind(kind)
    assert recorder.steps[-1].exit_code == 1
    error = orjson.loads(result.to_json())["error"]
    assert error["kind"] == kind
    if summary is not None:
        assert error["summary"] == summary
    for value in ("size", "i-0abc123", "42", "b-1"):
        assert value not in error["summary"]


async def test_failures_before_tofu_runs_have_their_own_kinds(
    kube: FakeKube, tmp_path: Path
) -> None:
    recorder = Recorder(ScriptedTofu(tmp_path), clock=Clock())
    stale = await run_op(environ(CAPTF_INPUTS_HASH="ef" * 32), kube, recorder, tmp_path)
    assert stale.error_kind is ErrorKind.INPUTS
    assert recorder.steps == []
    del kube.secrets["c-inputs-abababab"]
    missing = await run_op(environ(), kube, recorder, tmp_path)
    assert missing.error_kind is ErrorKind.INPUTS
    assert missing.summary == "inputs Secret c-inputs-abababab not found"


async def test_an_unexpected_error_is_internal_and_its_summary_names_only_its_type(
    tmp_path: Path,
) -> None:
    class Broken(FakeKube):
        async def get_secret(self, name: str) -> dict[str, object] | None:
            raise RuntimeError("something printed hunter2-the-password")

    result = await run_op(environ(), Broken(), ScriptedTofu(tmp_path), tmp_path)
    assert result.error_kind is ErrorKind.INTERNAL
    assert result.summary == "runner error: RuntimeError"


async def test_the_runtime_version_is_read_from_tofu_version_json() -> None:
    class Versioned:
        terminated = False

        def __init__(self, code: int, stdout: bytes) -> None:
            self.exit = Exit(code, "", stdout)

        async def run(self, *args: str, capture: bool = False) -> Exit:
            assert args == ("version", "-json")
            assert capture
            return self.exit

    printed = b'{"terraform_version": "1.9.0", "platform": "linux_amd64"}'
    assert await version_of(Versioned(0, printed)) == "1.9.0"
    assert await version_of(Versioned(0, b"OpenTofu v1.9.0")) is None
    assert await version_of(Versioned(0, b'{"terraform_version": "1.9 rm -rf"}')) is None
    assert await version_of(Versioned(1, printed)) is None


def test_a_small_result_keeps_everything() -> None:
    steps = (Step("init", 0, 1.25), Step("plan", 1, 0.5))
    body = orjson.loads(
        RunnerResult(
            outcome=Outcome.FAILURE,
            message="tofu plan failed",
            job_uid="uid-1",
            runtime_version="1.9.0",
            steps=steps,
            error_kind=ErrorKind.PLAN,
            summary='Invalid value for variable "x"',
        ).to_json()
    )
    assert body == {
        "outcome": "failed",
        "message": "tofu plan failed",
        "job": "uid-1",
        "error": {"kind": "plan", "summary": "Invalid value for variable …"},
        "runtimeVersion": "1.9.0",
        "steps": [
            {"name": "init", "exitCode": 0, "seconds": 1.25},
            {"name": "plan", "exitCode": 1, "seconds": 0.5},
        ],
    }


def test_the_message_gives_way_before_any_step() -> None:
    steps = tuple(Step("plan", 0, 1.0) for _ in range(20))
    text = RunnerResult(
        outcome=Outcome.FAILURE, message="x\n" * 3000, steps=steps, runtime_version="1.9.0"
    ).to_json()
    body = orjson.loads(text)
    assert len(body["steps"]) == 20
    assert len(body["message"].encode()) < 2048


def test_steps_give_way_oldest_first_once_the_message_is_at_its_floor() -> None:
    steps = tuple(Step(f"step-{chr(97 + i % 26)}", i, float(i)) for i in range(200))
    text = RunnerResult(
        outcome=Outcome.FAILURE,
        message="m" * 5000,
        steps=steps,
        runtime_version="1.9.0",
        error_kind=ErrorKind.APPLY,
        summary="creating thing",
    ).to_json()
    body = orjson.loads(text)
    assert len(text.encode()) <= 4096
    # The most steps that fit beside MESSAGE_FLOOR bytes of message; the message then
    # takes what room one more step would not fill.
    assert MESSAGE_FLOOR <= len(body["message"].encode()) < MESSAGE_FLOOR + 100
    kept = body["steps"]
    assert 1 <= len(kept) < 200
    assert kept[-1]["exitCode"] == 199  # the step that ended the op stays
    assert [s["exitCode"] for s in kept] == list(range(200 - len(kept), 200))
    assert body["error"] == {"kind": "apply", "summary": "creating thing"}
    assert body["runtimeVersion"] == "1.9.0"


_steps = st.lists(
    st.builds(
        Step,
        st.from_regex(r"[a-z][a-z-]{0,31}", fullmatch=True),
        st.integers(-(2**31), 2**31 - 1),
        st.floats(0, 1e6, allow_nan=False).map(lambda s: round(s, 2)),
    ),
    max_size=300,
)


@settings(max_examples=150, deadline=None)
@given(
    outcome=st.sampled_from(Outcome),
    message=st.text(max_size=6000),
    summary=st.text(max_size=3000),
    steps=_steps,
    version=st.none() | st.from_regex(r"[0-9][0-9a-z.+-]{0,39}", fullmatch=True),
    serial=st.none() | st.integers(0, 2**40),
    kind=st.none() | st.sampled_from(ErrorKind).filter(lambda k: k.value not in CLOUD_KINDS),
    # A cloud kind is always written with the signal that gave it.
    cloud=st.none() | st.sampled_from(sorted(SIGNALS.items())),
    outputs=st.none() | st.lists(st.from_regex(r"[a-z_]{1,30}", fullmatch=True), max_size=20),
)
def test_any_report_is_a_whole_result_within_the_termination_message(
    outcome: Outcome,
    message: str,
    summary: str,
    steps: list[Step],
    version: str | None,
    serial: int | None,
    kind: ErrorKind | None,
    cloud: tuple[str, CloudKind] | None,
    outputs: list[str] | None,
) -> None:
    signal = None
    if cloud is not None:
        signal, kind = cloud[0], ErrorKind(cloud[1].value)
    result = RunnerResult(
        outcome=outcome,
        message=message,
        state_serial=serial,
        outputs=None if outputs is None else tuple(outputs),
        job_uid="0b0e5a43-6a4f-4f4e-9d3b-9f0c7f1e2a11",
        runtime_version=version,
        steps=tuple(steps),
        error_kind=kind,
        summary=summary,
        signal=signal,
    )
    text = result.to_json()
    assert len(text.encode()) <= 4096
    body = orjson.loads(text)  # whole JSON, never cut
    # What the result is never gives way: the controller reads it as written.
    assert result_of(text, "0b0e5a43-6a4f-4f4e-9d3b-9f0c7f1e2a11") == text
    assert body["outcome"] == outcome.value
    assert body.get("stateSerial") == serial
    assert body.get("outputs") == outputs
    assert body["job"] == result.job_uid
    if kind is not None:
        assert body["error"]["kind"] == kind.value
        assert body["error"].get("signal") == signal
        assert len(body["error"].get("summary", "")) <= SUMMARY_LIMIT
        assert body["error"]["kind"] in ERROR_KINDS
    kept = body.get("steps", [])
    assert kept == [s.to_json() for s in steps[len(steps) - len(kept) :]]
