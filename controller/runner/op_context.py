"""What every step of a Job's operation shares (ops.py carries the steps out): the
op's context (the Job's environment, the API, tofu, the work directory, the state
store), and how a step ends the op with a failure: `Stop` with a `RunnerResult` of
`failed`, or of `tofu_failed` for a tofu command that exited non-zero."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from controller.core.contract import outputs as outputs_contract
from controller.core.contract.roles import UnknownKind, contract_for_kind
from controller.core.jobs.cloud_signals import recognise
from controller.core.jobs.job import Outcome
from controller.core.jobs.run_report import ErrorKind, headline, is_lock_error
from controller.runner.env import RunnerEnv
from controller.runner.kube import Kube
from controller.runner.result import MESSAGE_LIMIT, RunnerResult, bounded
from controller.runner.state import StateStore
from controller.runner.tofu import Exit


class Tofu(Protocol):
    @property
    def terminated(self) -> bool: ...

    async def run(self, *args: str, capture: bool = False) -> Exit: ...


@dataclass(frozen=True)
class OpContext:
    env: RunnerEnv
    kube: Kube
    tofu: Tofu
    work_dir: Path
    store: StateStore


class Stop(Exception):
    """Ends the op early with `result`."""

    def __init__(self, result: RunnerResult) -> None:
        super().__init__(result.message)
        self.result = result


def failed(
    message: str, kind: ErrorKind, serial: int | None = None, *, summary: str | None = None
) -> RunnerResult:
    """A failure of `kind`. Its summary is the message's first line unless given: a line
    the runner wrote, whose values go all the same once it is redacted (result.py)."""
    first = message.strip().splitlines()[:1]
    return RunnerResult(
        outcome=Outcome.FAILURE,
        message=message,
        state_serial=serial,
        error_kind=kind,
        summary=first[0] if summary is None and first else summary or "",
    )


# The error kind of a tofu command that failed, by the step's name.
_KINDS = {
    "init": ErrorKind.INIT,
    "plan": ErrorKind.PLAN,
    "show": ErrorKind.PLAN,
    "apply": ErrorKind.APPLY,
    "apply -refresh-only": ErrorKind.REFRESH,
    "destroy": ErrorKind.DESTROY,
}


def tofu_failed(ctx: OpContext, what: str, ex: Exit, serial: int | None = None) -> RunnerResult:
    # The headline leaves room for it in the bounded message; the stderr tail fills the rest.
    tail = bounded(ex.stderr, MESSAGE_LIMIT - 200)
    if ctx.tofu.terminated:
        saved = "" if serial is None else f"; state saved at serial {serial}"
        message = f"interrupted by SIGTERM during tofu {what}{saved}\n{tail}"
        return RunnerResult(outcome=Outcome.INTERRUPTED, message=message, state_serial=serial)
    kind = ErrorKind.STATE_LOCK if is_lock_error(ex.stderr) else _KINDS[what]
    # A failure the cloud's own signals explain is the cloud's: its kind, and which signal.
    signal = None if kind is ErrorKind.STATE_LOCK else recognise(ex.stderr)
    if signal is not None:
        kind = ErrorKind(signal.kind.value)
    # The summary is tofu's own headline, never a line of its output as printed.
    summary = headline(ex.stderr) or f"tofu {what} failed"
    result = failed(f"tofu {what} failed (exit {ex.code}):\n{tail}", kind, serial, summary=summary)
    if signal is not None:
        result = replace(result, signal=signal.name)
    missing = _missing_outputs(ctx, ex.stderr)
    return result if missing is None else replace(result, missing_outputs=missing)


def _missing_outputs(ctx: OpContext, stderr: str) -> tuple[str, ...] | None:
    """The contract outputs a failed plan says the role module lacks: the root re-exports
    each, and OpenTofu names the one the module does not declare."""
    try:
        role = contract_for_kind(ctx.env.object_kind).role
    except UnknownKind:
        return None
    missing = outputs_contract.missing_outputs(role, stderr)
    return None if missing is None else missing.names
