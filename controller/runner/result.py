"""The runner's result: its container's termination message, which the controller
records on the Job as the `captf.io/result` annotation.

Beside the outcome and what the op produced, a result reports the run
(docs/runner.md): the Job's uid, the runtime version, every step with its exit code
and seconds, and on failure the error kind with a one-line summary. All of it must fit
in RESULT_LIMIT bytes of JSON. What gives way when it would not, first to last:

1. the message, its last lines kept, down to MESSAGE_FLOOR bytes;
2. the addresses of the plan's changes, halved at each step, the first of each action
   kept longest (the counts stay);
3. the steps, oldest first, down to the last one (the step that ended the op);
4. the summary, then the runtime version;
5. the rest of the message, then the last step.

The outcome, the Job's uid, the state serial, the plan Secret, drift, the output names,
the contract reading, the error kind with its signal, the changes' counts and the policy
report (at most 1 KiB by construction) never give way: a result too large even without
the rest is written as a failure saying so, with its state serial."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import orjson

from controller.core.basics.changes import Changes
from controller.core.jobs.job import Outcome
from controller.core.jobs.policy_report import Report
from controller.core.jobs.run_report import SUMMARY_LIMIT, ErrorKind, one_line
from controller.core.jobs.termination import MESSAGE_LIMIT as RESULT_LIMIT

# The kubelet keeps RESULT_LIMIT bytes of a termination message, and the whole result
# must fit; an operator reads the message in `kubectl describe`, so the tail of tofu's
# error is enough.
MESSAGE_LIMIT = 2048
# What the message keeps before the steps and the summary give way.
MESSAGE_FLOOR = 512
# The error kinds a result may carry beside its outcome.
OUTPUTS_MISSING = ErrorKind.OUTPUTS_MISSING.value


@dataclass(frozen=True)
class Step:
    """One tofu command the op ran (controller/runner/steps.py records them)."""

    name: str
    exit_code: int
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "exitCode": self.exit_code, "seconds": self.seconds}


@dataclass(frozen=True, kw_only=True)
class RunnerResult:
    outcome: Outcome
    message: str = ""
    state_serial: int | None = None
    plan_secret: str | None = None
    drift: bool | None = None
    outputs: tuple[str, ...] | None = None  # names written to the outputs Secret, never values
    # The contract outputs a failed plan found the module lacks: the error kind
    # `outputs-missing`, which the controller shows as OutputsValid=False/OutputsMissing.
    missing_outputs: tuple[str, ...] | None = None
    # The contract reading of the state left (apply, refresh): pending outputs, health.
    contract: dict[str, object] | None = None
    # Why a failed op failed, and its one-line summary (run_report.one_line: no values).
    error_kind: ErrorKind | None = None
    summary: str = ""
    # With a cloud error kind: the signal of cloud_signals' table that gave it.
    signal: str | None = None
    # The run: the Job's uid (the controller checks it names the Job it read it from),
    # the runtime's version and the steps in order.
    job_uid: str | None = None
    runtime_version: str | None = None
    steps: tuple[Step, ...] = ()
    # What the plan changes (plan, apply, drift), and what the policies found of it.
    changes: Changes | None = None
    policy: Report | None = None

    def to_json(self) -> str:
        """The result as written: only the keys that apply to this op, within
        RESULT_LIMIT bytes, giving way in the order of the module's docstring."""
        for variant, floor in self._variants():
            text = variant._with_message(floor)
            if text is not None:
                return text
        too_large = f"the runner's result is larger than {RESULT_LIMIT} bytes"
        return RunnerResult(
            outcome=Outcome.FAILURE,
            message=too_large,
            state_serial=self.state_serial,
            job_uid=self.job_uid,
            error_kind=ErrorKind.INTERNAL,
        )._body(too_large)

    def _variants(self) -> Iterator[tuple[RunnerResult, int]]:
        """This result, then ever smaller versions of it, each with the least its message
        may keep (the message is cut to fit in each)."""
        yield self, MESSAGE_FLOOR
        base = self
        if self.changes is not None:
            shown = self.changes.listed()
            while shown > 0:
                shown //= 2
                yield replace(self, changes=self.changes.keeping(shown)), MESSAGE_FLOOR
            base = replace(self, changes=self.changes.keeping(0))
        for kept in range(len(base.steps) - 1, 0, -1):
            yield replace(base, steps=base.steps[-kept:]), MESSAGE_FLOOR
        last = replace(base, steps=base.steps[-1:], summary="")
        yield last, MESSAGE_FLOOR
        last = replace(last, runtime_version=None)
        yield last, MESSAGE_FLOOR
        yield last, 0
        yield replace(last, steps=()), 0

    def _with_message(self, floor: int) -> str | None:
        budget = MESSAGE_LIMIT
        while True:
            message = bounded(self.message, budget) if budget else ""
            text = self._body(message)
            excess = len(text.encode()) - RESULT_LIMIT
            if excess <= 0:
                return text
            if not message or budget <= floor:
                return None
            # Every byte dropped from the message drops at least one from the JSON.
            budget = max(floor, min(budget, len(message.encode())) - excess)

    def _body(self, message: str) -> str:
        body: dict[str, object] = {"outcome": self.outcome.value, "message": message}
        if self.job_uid:
            body["job"] = self.job_uid
        if self.state_serial is not None:
            body["stateSerial"] = self.state_serial
        if self.plan_secret is not None:
            body["planSecret"] = self.plan_secret
        if self.drift is not None:
            body["drift"] = self.drift
        if self.outputs is not None:
            body["outputs"] = list(self.outputs)
        if self.contract is not None:
            body["contract"] = self.contract
        if self.changes is not None:
            body["changes"] = self.changes.to_json()
        if self.policy is not None:
            body["policy"] = self.policy.to_json()
        error = self._error()
        if error is not None:
            body["error"] = error
        if self.runtime_version is not None:
            body["runtimeVersion"] = self.runtime_version
        if self.steps:
            body["steps"] = [step.to_json() for step in self.steps]
        return orjson.dumps(body).decode()

    def _error(self) -> dict[str, object] | None:
        if self.missing_outputs is not None:
            kind: ErrorKind | None = ErrorKind.OUTPUTS_MISSING
        else:
            kind = self.error_kind
        if kind is None:
            return None
        error: dict[str, object] = {"kind": kind.value}
        summary = one_line(self.summary, SUMMARY_LIMIT) if self.summary else ""
        if summary:
            error["summary"] = summary
        if self.signal is not None and kind is self.error_kind:
            error["signal"] = self.signal
        if self.missing_outputs is not None:
            error["outputs"] = list(self.missing_outputs)
        return error

    @property
    def exit_code(self) -> int:
        return 0 if self.outcome is Outcome.SUCCESS else 1


def bounded(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """The last lines of `text` that fit in `limit` UTF-8 bytes, blank lines dropped.

    The end of tofu's stderr holds the error that stopped it; earlier lines
    are warnings and progress."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        cost = len(line.encode()) + (1 if kept else 0)
        if size + cost > limit:
            if not kept:
                # One line longer than the limit: keep its end, on a character boundary.
                kept.append(line.encode()[-limit:].decode("utf-8", "ignore"))
            break
        kept.append(line)
        size += cost
    return "\n".join(reversed(kept))
