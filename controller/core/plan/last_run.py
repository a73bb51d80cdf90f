"""status.lastRun: what the newest finished Job of an object reported.

Derived from the Job and the result recorded on it (never from memory), so every pass,
and a controller after a restart, computes the same value; the status write then
changes it once per finished Job. Once the Jobs are pruned the status keeps what it
showed, and an older Job never replaces a newer one's report.

The summary is shown only for a run that did not succeed; it is redacted with the
values its Job carried and its values stripped again (run_report.one_line), whoever
wrote it. Pure."""

from __future__ import annotations

from collections.abc import Callable

from controller.core.basics import changes
from controller.core.basics.redact import Redactor
from controller.core.basics.timefmt import format_time
from controller.core.jobs.history import Finished, History
from controller.core.jobs.job import Outcome, error_kind_of, result
from controller.core.jobs.run_report import (
    CLOUD_KINDS,
    ERROR_KINDS,
    ErrorKind,
    one_line,
    signal_of,
    valid_step,
    valid_version,
)
from controller.core.jobs.termination import redacted_changes
from runtime.jsonobj import Json

DEADLINE_EVENT = "JobDeadlineExceeded"
TIMEOUT_SUMMARY = "killed at the Job's activeDeadlineSeconds"
NO_RESULT_SUMMARY = "the Job finished without a result"
# The steps shown, the last ones: the CRD's maxItems (a runner image may report more).
STEPS_SHOWN = 100


def last_run_of(
    history: History, redactor_of: Callable[[Json], Redactor], old: object = None
) -> Json | None:
    """The lastRun to show: the newest finished Job's, unless `old` (what the status
    shows) reports a Job that finished later; None when neither says anything."""
    newest = next(iter(history), None)
    if newest is None:
        return old if isinstance(old, dict) else None
    new = run_of(newest, redactor_of(newest.job))
    if isinstance(old, dict) and str(old.get("finishedAt", "")) > new["finishedAt"]:
        return old
    return new


def run_of(record: Finished, redactor: Redactor) -> Json:
    """One finished Job's report: the Job, its op and outcome, its times, the runtime
    version, the error kind and summary of a run that failed, and its steps."""
    job = record.job
    res = result(job) or {}
    status = job.get("status") or {}
    out: Json = {"job": record.name, "op": record.op, "result": record.outcome.value}
    started = status.get("startTime") or job.get("metadata", {}).get("creationTimestamp")
    if started:
        out["startedAt"] = str(started)
    out["finishedAt"] = format_time(record.at)
    if valid_version(res.get("runtimeVersion")):
        out["runtimeVersion"] = res["runtimeVersion"]
    kind, summary = _error_of(record, res)
    if kind is not None:
        out["errorKind"] = kind
        signal = _signal(kind, res)
        if signal is not None:
            out["signal"] = signal
    if summary and record.outcome is not Outcome.SUCCESS:
        out["summary"] = one_line(redactor.text(summary))
    steps = res.get("steps")
    if isinstance(steps, list) and steps and all(valid_step(s) for s in steps):
        out["steps"] = [dict(s) for s in steps[-STEPS_SHOWN:]]
    shown = changes_shown(res, redactor)
    if shown is not None:
        out["changes"] = shown
    return out


def error_kind(record: Finished) -> str | None:
    """The error kind lastRun shows for this Job: None unless it failed."""
    return _error_of(record, result(record.job) or {})[0]


def cloud_note(record: Finished) -> str:
    """`cloud-throttled (aws:RequestLimitExceeded)`, for a failure the cloud's own signal
    explains; "" for any other Job."""
    res = result(record.job) or {}
    kind = _error_of(record, res)[0]
    signal = _signal(kind, res)
    return f"{kind} ({signal})" if signal is not None else ""


def _signal(kind: str | None, res: Json) -> str | None:
    """The result's signal, when the kind shown is the cloud kind it gave."""
    return signal_of(res.get("error")) if kind in CLOUD_KINDS else None


def changes_shown(res: Json, redactor: Redactor) -> Json | None:
    """What the run's plan changes (a plan, an apply, a drift check), its addresses
    redacted with the values its Job carried; None when the result says nothing."""
    found = changes.from_json(res.get("changes"))
    return None if found is None else redacted_changes(found, redactor).to_json()


def _error_of(record: Finished, res: Json) -> tuple[str | None, str]:
    """(error kind, summary): the controller's own for a deadline kill and a Job that
    left no result, else what the result says."""
    if record.verdict.event == DEADLINE_EVENT:
        return ErrorKind.TIMEOUT.value, TIMEOUT_SUMMARY
    if not res and record.outcome is Outcome.FAILURE:
        return ErrorKind.CONTRACT.value, NO_RESULT_SUMMARY
    kind = error_kind_of(res)
    error = res.get("error")
    summary = error.get("summary") if isinstance(error, dict) else None
    if kind not in ERROR_KINDS or record.outcome is not Outcome.FAILURE:
        kind = None
    return kind, summary if isinstance(summary, str) else ""
