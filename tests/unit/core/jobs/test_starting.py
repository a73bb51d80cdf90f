"""A Job that cannot start, told from what the cluster shows: the Job controller's
FailedCreate Event while the Job has no pod, or a pod waiting on an image pull failure;
reported at once, ended after the grace with a failed result, and counted as a failure."""

from __future__ import annotations

from datetime import datetime, timedelta

import orjson
import pytest

from controller.core.basics.names import ANN_RESULT
from controller.core.decide import snapshot
from controller.core.decide.decision import Requeue, Run
from controller.core.decide.settings import Settings
from controller.core.jobs import starting
from controller.core.jobs.history import History
from controller.core.jobs.job import Outcome, classify
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests import builders as b

SA_MISSING = (
    'Error creating: pods "c1-apply-1-" is forbidden: error looking up service account '
    'default/deployer: serviceaccount "deployer" not found'
)


def running(seq: int = 1) -> Json:
    return b.job("apply", seq, None, state="Running", created=b.ago(minutes=2))


def failed_create(job: Json, message: str = SA_MISSING, at: datetime | None = None) -> Json:
    when = b.ts(at or b.ago(seconds=30))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": b.NS, "creationTimestamp": when},
        "involvedObject": {
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": job["metadata"].get("uid", ""),
        },
        "reason": "FailedCreate",
        "message": message,
        "firstTimestamp": when,
        "lastTimestamp": when,
    }


def pod(job: Json, waiting: str | None = "ImagePullBackOff", *, init: bool = False) -> Json:
    state: Json = {"waiting": {"reason": waiting, "message": "not found"}} if waiting else {}
    status = {"name": "runner", "image": "registry.example/captf:missing", "state": state}
    key = "initContainerStatuses" if init else "containerStatuses"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job['metadata']['name']}-x",
            "namespace": b.NS,
            "creationTimestamp": b.ts(b.ago(seconds=20)),
            "labels": {"batch.kubernetes.io/job-name": job["metadata"]["name"]},
        },
        "status": {"phase": "Pending", key: [status]},
    }


JOB = running()
OTHER = running(2)
# (case, events, pods, expected reason or None, a word of the cause)
CASES = [
    (
        "FailedCreate, no pod",
        [failed_create(JOB)],
        [],
        "JobCannotStart",
        'serviceaccount "deployer"',
    ),
    (
        "a quota",
        [failed_create(JOB, 'pods "x" is forbidden: exceeded quota: q, requested: pods=1')],
        [],
        "JobCannotStart",
        "exceeded quota",
    ),
    ("FailedCreate, but a pod exists since", [failed_create(JOB)], [pod(JOB, None)], None, ""),
    ("another Job's FailedCreate", [failed_create(OTHER)], [], None, ""),
    ("image pull back-off", [], [pod(JOB)], "ImagePullBackOff", "registry.example/captf:missing"),
    ("ErrImagePull", [], [pod(JOB, "ErrImagePull")], "ImagePullBackOff", "ErrImagePull"),
    ("an init container's pull", [], [pod(JOB, init=True)], "ImagePullBackOff", "captf:missing"),
    ("waiting to be created", [], [pod(JOB, "ContainerCreating")], None, ""),
    ("another Job's pod", [], [pod(OTHER)], None, ""),
    ("nothing at all", [], [], None, ""),
]


@pytest.mark.parametrize(
    ("events", "pods", "reason", "word"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_classification(
    events: list[Json], pods: list[Json], reason: str | None, word: str
) -> None:
    stuck = starting.stuck_of(JOB, events, pods)
    if reason is None:
        assert stuck is None
        return
    assert stuck is not None
    assert stuck.reason == reason
    assert word in stuck.cause


def test_the_grace_counts_from_the_first_refusal() -> None:
    first = failed_create(JOB, at=b.NOW - timedelta(seconds=50))
    later = failed_create(JOB, at=b.NOW - timedelta(seconds=5))
    stuck = starting.stuck_of(JOB, [later, first], [])
    assert stuck is not None
    assert starting.overdue(stuck, b.NOW, 60.0) == 10.0
    assert starting.overdue(stuck, b.NOW + timedelta(seconds=30), 60.0) == 0.0


def _snap(
    events: list[Json], pods: list[Json], jobs: list[Json] | None = None
) -> snapshot.Snapshot:
    obj = b.captf(spec={"variables": {"size": 4}})
    obj["status"] = {"activeJob": JOB["metadata"]["name"]}
    return snapshot.build(obj, [*b.base_objects(), *(jobs or [JOB]), *events, *pods])


def test_a_job_that_cannot_start_is_reported_at_once_with_the_cause() -> None:
    todo = plan_pass(_snap([failed_create(JOB, at=b.NOW - timedelta(seconds=5))], []), b.NOW)
    assert isinstance(todo.decision, Requeue)
    assert todo.decision.reason == "JobCannotStart"
    assert 'serviceaccount "deployer" not found' in todo.decision.message
    assert todo.decision.after == 55.0  # the rest of the grace
    assert todo.end_jobs == ()
    assert todo.status is not None
    [waiting] = [c for c in todo.status["conditions"] if c["type"] == "Waiting"]
    assert waiting["reason"] == "JobCannotStart"


def test_past_the_grace_the_job_is_ended_with_a_failed_result() -> None:
    settings = Settings(cannot_start_grace=10.0)
    todo = plan_pass(_snap([], [pod(JOB)]), b.NOW, settings=settings)
    assert isinstance(todo.decision, Requeue)
    assert todo.decision.reason == "ImagePullBackOff"
    [ending] = todo.end_jobs
    assert ending.job == JOB["metadata"]["name"]
    body = orjson.loads(ending.value)
    assert body["outcome"] == "failed"
    assert body["error"] == {"kind": "CannotStart", "reason": "ImagePullBackOff"}
    assert "registry.example/captf:missing" in body["message"]
    # Once its result is recorded the Job is not ended twice; it waits for the Job
    # controller to fail it.
    ended = JOB | {"metadata": JOB["metadata"] | {"annotations": {ANN_RESULT: ending.value}}}
    again = plan_pass(_snap([], [pod(ended)], [ended]), b.NOW, settings=settings)
    assert again.end_jobs == ()
    assert isinstance(again.decision, Requeue)
    assert again.decision.reason == "ImagePullBackOff"


def test_an_ended_job_counts_as_a_failure_and_backs_off() -> None:
    result = {"message": "Job c1-apply-1 cannot start: x", "error": {"kind": "CannotStart"}}
    failed = b.job(
        "apply", 1, "failed", reason="DeadlineExceeded", result=result, finished=b.ago(seconds=10)
    )
    verdict = classify(failed)
    assert verdict.outcome == Outcome.FAILURE
    assert verdict.event == "JobCannotStart"
    assert verdict.message == "Job c1-apply-1 cannot start: x"
    # Counted: the next apply waits out the first backoff (1 minute) instead of running.
    assert len(History((failed,), lambda _: True).failures("apply")) == 1
    obj = b.captf(spec={"variables": {"size": 4}})
    todo = plan_pass(snapshot.build(obj, [*b.base_objects(), failed]), b.NOW)
    assert not isinstance(todo.decision, Run)
    assert isinstance(todo.decision, Requeue)
    assert todo.decision.reason.endswith("Backoff")


def test_a_deadline_without_the_controllers_result_is_still_a_deadline() -> None:
    failed = b.job("apply", 1, None, reason="DeadlineExceeded")
    assert classify(failed).event == "JobDeadlineExceeded"
