"""The make run timeline: the failure cause in full, and wall and controller time apart."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from typing import Any

from controller.dev.timeline import Timeline, cause_lines
from runtime.clock import SteppedClock
from tests.builders import job

TOFU = (
    "tofu apply failed (exit 1):\n"
    "Error: local-exec provisioner error\n"
    "\n"
    "  with terraform_data.flaky,\n"
    '  on main.tf line 5, in resource "terraform_data" "flaky":\n'
    '   5:   provisioner "local-exec" {\n'
    "\n"
    "Error running command 'n=$(cat /tmp/counter)': exit status 1. Output:\n"
    "simulated cloud API error: throttled (attempt 1)\n"
)


def _timeline(scale: float) -> tuple[Timeline, io.StringIO]:
    out = io.StringIO()
    clock = SteppedClock(datetime(2026, 6, 1, 2, 0, 0, tzinfo=UTC))
    transport: Any = object()  # nothing runs: only the handlers are called
    return Timeline(transport, clock=clock, scale=scale, out=out), out


def test_a_failure_shows_its_headline_and_its_cause() -> None:
    timeline, out = _timeline(30.0)
    finished = job("apply", 1, "failed", result={"message": TOFU})
    timeline._on_job(None, finished)
    lines = out.getvalue().splitlines()
    assert "failed: Job c1-apply-00000001 failed: tofu apply failed (exit 1):" in lines[0]
    assert lines[-1].endswith("simulated cloud API error: throttled (attempt 1)")
    assert len(lines) == 7  # every non-empty line: no more than the headline and CAUSE_LINES
    assert all(len(line) < 250 for line in lines)


def test_wall_and_controller_time_are_shown_apart_when_scaled() -> None:
    timeline, out = _timeline(30.0)
    timeline.say("TerraformCluster/flaky", "idle: up to date")
    assert re.match(r"\d\d:\d\d:\d\d \[ctl 02:00:00\]  TerraformCluster/flaky", out.getvalue())
    unscaled, plain = _timeline(1.0)
    unscaled.say("TerraformCluster/flaky", "idle")
    assert "[ctl" not in plain.getvalue()


def test_a_wait_is_in_controller_time_and_lasts_wall_seconds() -> None:
    timeline, out = _timeline(30.0)
    timeline._decision(
        "TerraformCluster/flaky",
        {"op": "apply", "reason": "InputsChangedBackoff", "at": "2026-06-01T02:01:00Z"},
    )
    assert "waits: apply InputsChangedBackoff until 02:01:00 (in 2.0s wall)" in out.getvalue()


def test_cause_lines() -> None:
    assert cause_lines("one") == ["one"]
    assert cause_lines("a\n\nb\n") == ["a", "b"]
    many = "\n".join(f"l{i}" for i in range(20))
    assert cause_lines(many, keep=3) == ["l0", "... (16 lines)", "l17", "l18", "l19"]


def test_a_finished_job_is_told_once_the_controller_has_recorded_its_result() -> None:
    timeline, out = _timeline(30.0)
    done = job("apply", 1, "succeeded", result={"message": "applied: 1 to change"})
    annotations = dict(done["metadata"]["annotations"])
    annotations.pop("captf.io/result")
    unrecorded = done | {"metadata": done["metadata"] | {"annotations": annotations}}
    timeline._on_job(None, unrecorded)
    assert out.getvalue() == ""  # not "completed with no result": the pod has it still
    timeline._on_job(unrecorded, done)
    timeline._on_job(done, done)
    assert out.getvalue().count("succeeded: applied: 1 to change") == 1
