"""A Job that cannot start, told from what the cluster shows about it.

Two ways a Job stays "running" without ever running:

- its pods cannot be created: the Job controller records a `FailedCreate` Event on
  the Job (a missing ServiceAccount, a quota, an admission refusal) and creates no
  pod; the Job's status says nothing (no condition, `active` 0). The Event, and no
  pod of the Job, is the reliable sign;
- its image cannot be pulled: its pod stays Pending with a container (or an init
  container, or an image volume's) waiting `ErrImagePull` or `ImagePullBackOff`.

Either is reported at once (the Waiting reason `JobCannotStart` or
`ImagePullBackOff`, with the cause); after the operator's grace (`--cannot-start-grace`,
counted from the pod's or the first Event's time) the Job is ended: its result recorded
as a `failed` one naming the cause, and its activeDeadlineSeconds cut to one second,
so the Job controller fails it at once. The failure is then counted like any other
(docs/decisions.md, "A Job that cannot start"): it backs off by the seed's rules, and
never waits out the Job's deadline. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from controller.core.basics.names import CANNOT_START, Reason
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.core.jobs.job import labels_of, name_of, result
from controller.core.jobs.termination import redacted
from runtime.jsonobj import Json

FAILED_CREATE: Final = "FailedCreate"
# The kubelet's waiting reasons of an image that cannot be had.
PULL_FAILURES: Final = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
# The Job controller's labels on a Job's pods (the older name, then the newer).
JOB_NAME_LABELS: Final = ("batch.kubernetes.io/job-name", "job-name")
# Seconds between checks while a stuck Job is ended (the Job watch wakes sooner).
ENDING_WAIT: Final = 5.0


@dataclass(frozen=True)
class Stuck:
    """Why the Job cannot start (`reason`: a Waiting reason), since when."""

    reason: str
    cause: str
    since: datetime | None  # None: no readable time; counted from now

    def message(self, job: str) -> str:
        return f"Job {job} cannot start: {self.cause}"


def stuck_of(job: Json, events: Iterable[Json], pods: Iterable[Json]) -> Stuck | None:
    """Why a running Job cannot start, or None: a pod's image pull failure first, else
    the Job controller's FailedCreate while the Job has no pod."""
    own_pods = [p for p in pods if _pod_of(p, job)]
    for pod in own_pods:
        pulling = pull_failure(pod)
        if pulling is not None:
            return pulling
    if own_pods:
        return None  # a pod exists: whatever refused an earlier create let this one through
    refusals = [e for e in events if _about(e, job) and e.get("reason") == FAILED_CREATE]
    if not refusals:
        return None
    times = [t for t in (_event_time(e) for e in refusals) if t is not None]
    newest = max(refusals, key=lambda e: str(e.get("lastTimestamp") or ""))
    return Stuck(Reason.JOB_CANNOT_START, str(newest.get("message", "")), min(times, default=None))


def _pod_of(pod: Json, job: Json) -> bool:
    labels = labels_of(pod)
    named = next((labels[k] for k in JOB_NAME_LABELS if k in labels), None)
    return named == name_of(job) and pod.get("metadata", {}).get("namespace") == _ns(job)


def _about(event: Json, job: Json) -> bool:
    involved = event.get("involvedObject") or {}
    uid = job.get("metadata", {}).get("uid")
    same_uid = not uid or not involved.get("uid") or involved.get("uid") == uid
    return (
        involved.get("kind") == "Job"
        and involved.get("name") == name_of(job)
        and event.get("metadata", {}).get("namespace") == _ns(job)
        and same_uid
    )


def _ns(obj: Json) -> str:
    return str(obj.get("metadata", {}).get("namespace", ""))


def pull_failure(pod: Json) -> Stuck | None:
    """The image pull failure a pod's containers wait on, or None."""
    status = pod.get("status") or {}
    for container in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in PULL_FAILURES:
            image = container.get("image") or "?"
            said = f": {waiting['message']}" if waiting.get("message") else ""
            cause = f"{reason} for image {image}{said}"
            return Stuck(
                Reason.IMAGE_PULL_BACK_OFF,
                cause,
                _time(pod.get("metadata", {}), "creationTimestamp"),
            )
    return None


def _event_time(event: Json) -> datetime | None:
    for holder, key in (
        (event, "firstTimestamp"),
        (event, "eventTime"),
        (event.get("metadata", {}), "creationTimestamp"),
    ):
        found = _time(holder, key)
        if found is not None:
            return found
    return None


def _time(holder: Json, key: str) -> datetime | None:
    value = holder.get(key)
    if not value:
        return None
    try:
        return parse_time(str(value))
    except TimeFormatError:
        return None


def overdue(stuck: Stuck, now: datetime, grace: float) -> float:
    """Seconds of the grace left (0 once it has passed)."""
    if stuck.since is None:
        return grace
    return max(grace - (now - stuck.since).total_seconds(), 0.0)


def ended_result(job: Json, stuck: Stuck, redactor: Any) -> str:
    """The result recorded on a Job ended because it could not start (its message
    redacted like any message the controller writes about a Job)."""
    body = {
        "outcome": "failed",
        "message": stuck.message(name_of(job)),
        "error": {"kind": CANNOT_START, "reason": stuck.reason},
    }
    return redacted(orjson.dumps(body).decode(), redactor)


def was_ended(job: Json) -> bool:
    """Whether the controller ended the Job as one that could not start."""
    error = (result(job) or {}).get("error") or {}
    return isinstance(error, dict) and error.get("kind") == CANNOT_START
