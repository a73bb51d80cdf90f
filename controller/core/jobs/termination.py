"""The runner's result as its container's termination message: read, checked, recorded.

The runner writes its result (the JSON of the `captf.io/result` annotation) to its
container's termination message; the kubelet puts it in the pod's status. The
controller reads it once the Job finished and records it on the Job as the
annotation, so everything else reads a result from the Job alone.

Whatever the message holds, the result recorded is one the core can read: a
message that is not JSON, too large, not shaped like a result or naming another Job's
uid becomes a `failed` result of error kind `contract` naming what was wrong (never
the message itself, which nothing vouches for: it may hold anything a module printed),
and follows the backoff of any counted failure. Its Event's reason is
InvalidRunnerResult (controller/core/jobs/job.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import orjson

from controller.core.basics import changes
from controller.core.basics.names import ANN_RESULT
from controller.core.basics.redact import Redactor
from controller.core.jobs import policy_report
from controller.core.jobs.job import (
    Outcome,
    annotations_of,
    is_accounted,
    is_finished,
    name_of,
)
from controller.core.jobs.run_report import (
    ErrorKind,
    one_line,
    valid_error,
    valid_step,
    valid_version,
)
from runtime.jsonobj import Json

# The kubelet keeps at most this much of a termination message; the runner writes less.
MESSAGE_LIMIT = 4096
# The runner's container in the Job's pod template (controller/core/plan/jobspec.py).
RUNNER_CONTAINER = "runner"
# Where the runner writes it: the Kubernetes default, which the Job states anyway.
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
# What the Job controller labels its pods with (and the runner reads its Job's uid from).
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"

NOT_JSON = "runner result is not valid JSON"
NOT_A_RESULT = "runner result is not a valid result"
TOO_LARGE = f"runner result is larger than {MESSAGE_LIMIT} bytes"
OTHER_JOB = "runner result names another Job"

_OUTCOMES = frozenset(o.value for o in Outcome)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# The keys a result may carry (controller/runner/result.py writes them), each with its type.
_KEYS: Mapping[str, Callable[[object], bool]] = {
    "outcome": lambda v: isinstance(v, str) and v in _OUTCOMES,
    "message": lambda v: isinstance(v, str),
    "stateSerial": _is_int,
    "planSecret": lambda v: isinstance(v, str),
    "drift": lambda v: isinstance(v, bool),
    "outputs": _is_names,
    "contract": lambda v: isinstance(v, dict),
    "error": valid_error,
    "job": lambda v: isinstance(v, str),
    "runtimeVersion": valid_version,
    "steps": lambda v: isinstance(v, list) and all(valid_step(s) for s in v),
    "changes": lambda v: changes.from_json(v) is not None,
    "policy": lambda v: policy_report.from_json(v) is not None,
}


def needs_result(job: Json) -> bool:
    """Whether the controller should look for the Job's result in its pod: it finished,
    records none yet, and is not accounted (an accounted Job is done with)."""
    return is_finished(job) and ANN_RESULT not in annotations_of(job) and not is_accounted(job)


def message_of(pods: Iterable[Json]) -> str | None:
    """The termination message of the runner container among a Job's pods: the one that
    terminated last; None when no pod has one (gone, or the runner wrote nothing)."""
    found: list[tuple[str, str]] = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != RUNNER_CONTAINER:
                continue
            ended = (status.get("state") or {}).get("terminated") or {}
            message = ended.get("message")
            if isinstance(message, str) and message:
                found.append((str(ended.get("finishedAt") or ""), message))
    return max(found)[1] if found else None


def result_of(message: str, uid: str) -> str:
    """The annotation value to record for a termination message read from the pod of Job
    `uid`: the message itself when it is a valid result of that Job (a result that names
    no Job is one of a runner from before results named theirs), else a `failed` result
    saying what is wrong with it."""
    if len(message.encode()) > MESSAGE_LIMIT:
        return _failed(TOO_LARGE)
    try:
        parsed = orjson.loads(message)
    except orjson.JSONDecodeError:
        return _failed(NOT_JSON)
    if not _valid(parsed):
        return _failed(NOT_A_RESULT)
    if parsed.get("job", uid) != uid:
        return _failed(OTHER_JOB)
    return message


def _valid(parsed: object) -> bool:
    if not isinstance(parsed, dict) or "outcome" not in parsed:
        return False
    return all(key in _KEYS and _KEYS[key](value) for key, value in parsed.items())


def _failed(why: str) -> str:
    error = {"kind": ErrorKind.CONTRACT.value, "summary": why}
    return orjson.dumps({"outcome": Outcome.FAILURE.value, "message": why, "error": error}).decode()


def with_result(job: Json, value: str) -> Json:
    """The Job as it is once `value` is recorded on it (a copy: the caches' Jobs are shared)."""
    meta = job.get("metadata") or {}
    annotations = annotations_of(job) | {ANN_RESULT: value}
    return job | {"metadata": meta | {"annotations": annotations}}


@dataclass(frozen=True)
class Recorded:
    """A result read from a finished Job's pod, to record on exactly that Job (its uid)."""

    job: str
    uid: str
    value: str


def recordings(
    jobs: Iterable[Json], results: Mapping[str, str], redactor_of: Callable[[Json], Redactor]
) -> tuple[Recorded, ...]:
    """The writes that record `results` (Job name -> annotation value) on their Jobs, each
    message redacted with the values its Job carried: the runner redacts before it writes,
    but what the controller writes it redacts itself, whatever image ran."""
    return tuple(
        Recorded(
            name_of(job),
            str(job.get("metadata", {}).get("uid", "")),
            redacted(results[name_of(job)], redactor_of(job)),
        )
        for job in jobs
        if name_of(job) in results
    )


def redacted(value: str, redactor: Redactor) -> str:
    """A checked result (`result_of`) with its message and summary redacted (the summary's
    values stripped again after, as the runner does); unchanged when nothing is."""
    body = orjson.loads(value)
    out = dict(body)
    message = body.get("message")
    if isinstance(message, str):
        out["message"] = redactor.text(message)
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("summary"), str):
        out["error"] = error | {"summary": one_line(redactor.text(error["summary"]))}
    # Addresses and a policy's texts are no values, but a module could put one in an
    # address (a for_each key): they pass the same redaction.
    shown = changes.from_json(body.get("changes"))
    if shown is not None:
        out["changes"] = redacted_changes(shown, redactor).to_json()
    report = policy_report.from_json(body.get("policy"))
    if report is not None:
        out["policy"] = redacted_report(report, redactor).to_json()
    return value if out == body else orjson.dumps(out).decode()


def redacted_changes(found: changes.Changes, redactor: Redactor) -> changes.Changes:
    listed = {a: tuple(redactor.text(x) for x in v) for a, v in found.addresses.items()}
    return changes.Changes(found.counts, listed)


def redacted_report(report: policy_report.Report, redactor: Redactor) -> policy_report.Report:
    return policy_report.Report(
        report.verdict,
        tuple(
            replace(
                v,
                message=redactor.text(v.message),
                addresses=tuple(redactor.text(a) for a in v.addresses),
            )
            for v in report.violations
        ),
        report.total,
    )
