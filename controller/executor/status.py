"""Job status as the Job controller writes it, as a pure function of the old status and an event.

kube-apiserver (1.31 and later) validates Job status transitions; these are the
rules every status built here keeps, so the server accepts each one:

- a terminal condition (`Complete` or `Failed` True) needs `startTime`, `active: 0`,
  `terminating: 0` and no `ready` above `active`;
- `Failed=True` only with `FailureTarget=True` (same reason); `Complete=True` only
  with `SuccessCriteriaMet=True`, `succeeded` equal to completions (1 here) and a
  `completionTime` not before `startTime`; `completionTime` only on success;
- `startTime` is set once and never changed; a terminal Job never changes again.

`FailureTarget` alone means "doomed, its pod is being stopped": the Job controller
writes it when it starts killing a pod (deadline, pod failure policy) and adds
`Failed` once the pod is gone. The executor does the same, so watchers can see
that intermediate state exactly as on a real cluster."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from controller.core.timefmt import format_time, parse_time

Json = dict[str, Any]


class Reason(StrEnum):
    BACKOFF_LIMIT = "BackoffLimitExceeded"
    DEADLINE = "DeadlineExceeded"
    POD_FAILURE_POLICY = "PodFailurePolicy"


SUCCESS_REASON = "CompletionsReached"

# The Job controller's own condition messages, so logs and `kubectl describe` read alike.
MESSAGES = {
    Reason.BACKOFF_LIMIT: "Job has reached the specified backoff limit",
    Reason.DEADLINE: "Job was active longer than specified deadline",
    Reason.POD_FAILURE_POLICY: "Pod matched a FailJob rule of the pod failure policy",
    SUCCESS_REASON: "Reached expected number of succeeded pods",
}


@dataclass(frozen=True)
class Created:
    """The pod was created: the Job starts now, unless it started before."""


@dataclass(frozen=True)
class Running:
    """The container runs: the pod is ready (no readiness probes here)."""


@dataclass(frozen=True)
class Stopping:
    """The pod is being killed for `reason`: FailureTarget now, Failed when it is gone."""

    reason: Reason
    message: str = ""


@dataclass(frozen=True)
class Exited:
    """The container ended with `code`; a `stopped` pod fails whatever its code."""

    code: int
    stopped: Stopping | None = None


@dataclass(frozen=True)
class Lost:
    """Started earlier, but no process runs it any more (the executor restarted)."""

    message: str


Event = Created | Running | Stopping | Exited | Lost


def is_terminal(status: Json) -> bool:
    return _true(status, "Complete") is not None or _true(status, "Failed") is not None


def next_status(status: Json | None, event: Event, now: datetime) -> Json | None:
    """The status to write after `event`, or None when there is nothing to write.

    Never returns a status for a terminal Job, never moves `startTime`."""
    old = status or {}
    if is_terminal(old):
        return None
    new = copy.deepcopy(old)
    if isinstance(event, Created):
        return _created(new, now)
    if isinstance(event, Running):
        return _running(new)
    if "startTime" not in new:
        # A pod that never started cannot finish: the server would reject it.
        new["startTime"] = format_time(now)
    if isinstance(event, Stopping):
        return _stopping(new, event, now)
    if isinstance(event, Lost):
        return _failed(new, Reason.BACKOFF_LIMIT, event.message, now)
    return _exited(new, event, now)


def _created(new: Json, now: datetime) -> Json | None:
    if "startTime" in new:
        return None
    new.update(startTime=format_time(now), active=1, ready=0, terminating=0)
    return new


def _running(new: Json) -> Json | None:
    if "startTime" not in new or _true(new, "FailureTarget") is not None:
        return None
    if new.get("ready") == 1:
        return None
    new.update(active=1, ready=1)
    return new


def _stopping(new: Json, event: Stopping, now: datetime) -> Json | None:
    if _true(new, "FailureTarget") is not None:
        return None
    message = event.message or MESSAGES[event.reason]
    _set_condition(new, "FailureTarget", event.reason, message, now)
    # A pod being deleted counts as terminating, no longer as active.
    new.update(active=0, ready=0, terminating=1)
    return new


def _exited(new: Json, event: Exited, now: datetime) -> Json:
    target = _true(new, "FailureTarget")
    if target is not None:
        return _failed(new, str(target.get("reason", "")), str(target.get("message", "")), now)
    if event.stopped is not None:
        return _failed(new, event.stopped.reason, event.stopped.message, now)
    if event.code != 0:
        return _failed(new, Reason.BACKOFF_LIMIT, "", now)
    return _succeeded(new, now)


def _succeeded(new: Json, now: datetime) -> Json:
    started = parse_time(new["startTime"])
    new["completionTime"] = format_time(max(now, started))
    new.update(active=0, ready=0, terminating=0, succeeded=new.get("succeeded", 0) + 1)
    _set_condition(new, "SuccessCriteriaMet", SUCCESS_REASON, MESSAGES[SUCCESS_REASON], now)
    _set_condition(new, "Complete", SUCCESS_REASON, MESSAGES[SUCCESS_REASON], now)
    return new


def _failed(new: Json, reason: str, message: str, now: datetime) -> Json:
    text = message or MESSAGES.get(reason, reason)
    if _true(new, "FailureTarget") is None:
        _set_condition(new, "FailureTarget", reason, text, now)
    new.pop("completionTime", None)
    new.update(active=0, ready=0, terminating=0, failed=new.get("failed", 0) + 1)
    _set_condition(new, "Failed", reason, text, now)
    return new


def _true(status: Json, kind: str) -> Json | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            found: Json = cond
            return found
    return None


def _set_condition(status: Json, kind: str, reason: str, message: str, now: datetime) -> None:
    stamp = format_time(now)
    kept = [c for c in status.get("conditions") or [] if c.get("type") != kind]
    kept.append(
        {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    status["conditions"] = kept
