"""The runner's result as read from its termination message, case by case."""

from __future__ import annotations

import orjson
import pytest

from controller.core.basics.names import ANN_RESULT
from controller.core.basics.redact import REDACTED, redactor
from controller.core.decide import snapshot
from controller.core.decide.facts import Facts
from controller.core.jobs.job import INVALID_RESULT, Outcome, classify, result
from controller.core.jobs.termination import (
    MESSAGE_LIMIT,
    NOT_A_RESULT,
    NOT_JSON,
    OTHER_JOB,
    TOO_LARGE,
    Recorded,
    message_of,
    needs_result,
    recordings,
    result_of,
    with_result,
)
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests import builders as b

UID = "8c1e4f3a-0000-4000-8000-000000000001"
VALID = '{"outcome":"succeeded","message":"applied","stateSerial":3,"outputs":["a"]}'
FAILED = '{"outcome":"failed","message":"Error: quota exceeded"}'
EVERY_KEY = orjson.dumps(
    {
        "outcome": "failed",
        "message": "plan is missing outputs",
        "stateSerial": 0,
        "planSecret": "c1-plan-1",
        "drift": False,
        "outputs": [],
        "contract": {"pending": []},
        "error": {"kind": "outputs-missing", "summary": "Unsupported …", "outputs": ["e"]},
        "job": UID,
        "runtimeVersion": "1.9.0",
        "steps": [
            {"name": "init", "exitCode": 0, "seconds": 1.5},
            {"name": "plan", "exitCode": 1, "seconds": 2},
        ],
    }
).decode()

# (description, termination message, the result recorded: None means the message itself)
ROWS: list[tuple[str, str, str | None]] = [
    ("a success", VALID, None),
    ("a failure", FAILED, None),
    ("every key a result may carry", EVERY_KEY, None),
    ("exactly the limit", '{"outcome":"failed","message":"' + "x" * 4063 + '"}', None),
    ("not JSON", "Error: tofu crashed", NOT_JSON),
    ("cut JSON", VALID[:-10], NOT_JSON),
    ("empty object", "{}", NOT_A_RESULT),
    ("a list", '["succeeded"]', NOT_A_RESULT),
    ("a string", '"succeeded"', NOT_A_RESULT),
    ("an unknown outcome", '{"outcome":"great"}', NOT_A_RESULT),
    ("a message that is no string", '{"outcome":"failed","message":3}', NOT_A_RESULT),
    ("a serial that is no integer", '{"outcome":"succeeded","stateSerial":"3"}', NOT_A_RESULT),
    ("a serial that is a boolean", '{"outcome":"succeeded","stateSerial":true}', NOT_A_RESULT),
    ("drift that is no boolean", '{"outcome":"succeeded","drift":"yes"}', NOT_A_RESULT),
    ("outputs that are no names", '{"outcome":"succeeded","outputs":[1]}', NOT_A_RESULT),
    ("an unknown key", '{"outcome":"succeeded","accounted":true}', NOT_A_RESULT),
    ("an error of no known kind", '{"outcome":"failed","error":{"kind":"oops"}}', NOT_A_RESULT),
    (
        "an error with a key more",
        '{"outcome":"failed","error":{"kind":"apply","raw":""}}',
        NOT_A_RESULT,
    ),
    (
        "a summary too long",
        '{"outcome":"failed","error":{"kind":"apply","summary":"' + "s" * 161 + '"}}',
        NOT_A_RESULT,
    ),
    ("steps that are no list", '{"outcome":"failed","steps":{"init":0}}', NOT_A_RESULT),
    (
        "a step without seconds",
        '{"outcome":"failed","steps":[{"name":"init","exitCode":0}]}',
        NOT_A_RESULT,
    ),
    (
        "a step of negative seconds",
        '{"outcome":"failed","steps":[{"name":"init","exitCode":0,"seconds":-1}]}',
        NOT_A_RESULT,
    ),
    (
        "a step name that is text",
        '{"outcome":"failed","steps":[{"name":"Error: x","exitCode":0,"seconds":1}]}',
        NOT_A_RESULT,
    ),
    (
        "a version that is text",
        '{"outcome":"failed","runtimeVersion":"see https://x"}',
        NOT_A_RESULT,
    ),
    ("this Job's uid", '{"outcome":"failed","job":"' + UID + '"}', None),
    (
        "another Job's uid",
        '{"outcome":"succeeded","job":"8c1e4f3a-0000-4000-8000-000000000002"}',
        OTHER_JOB,
    ),
    ("over the limit", '{"outcome":"failed","message":"' + "x" * 4064 + '"}', TOO_LARGE),
    ("far over the limit", "x" * 100_000, TOO_LARGE),
]


@pytest.mark.parametrize(("message", "recorded"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_message_is_recorded_as_itself_or_as_a_failure_saying_why(
    message: str, recorded: str | None
) -> None:
    value = result_of(message, UID)
    if recorded is None:
        assert value == message
        return
    assert orjson.loads(value) == {
        "outcome": "failed",
        "message": recorded,
        "error": {"kind": "contract", "summary": recorded},
    }
    assert message not in value  # nothing of an unchecked message is repeated


def test_the_limit_is_the_kubelets() -> None:
    assert MESSAGE_LIMIT == 4096
    assert len(ROWS[3][1].encode()) == MESSAGE_LIMIT


def test_an_invalid_message_is_a_counted_failure_saying_why() -> None:
    job = with_result(b.job("apply", 1, None), result_of("not json", UID))
    classified = classify(job)
    assert classified.outcome is Outcome.FAILURE
    assert classified.event == INVALID_RESULT
    assert NOT_JSON in classified.message


def test_a_job_that_exited_0_with_an_invalid_message_says_so() -> None:
    job = with_result(b.job("apply", 1, None, state="Complete"), result_of("{oops", UID))
    classified = classify(job)
    assert classified.outcome is Outcome.FAILURE
    assert classified.event == INVALID_RESULT
    assert f"({NOT_JSON})" in classified.message
    assert "broke the contract" in classified.message


def _pod(*statuses: Json) -> Json:
    return {"status": {"containerStatuses": list(statuses)}}


def _terminated(
    message: str | None, at: str = "2026-01-01T00:00:00Z", name: str = "runner"
) -> Json:
    ended: Json = {"exitCode": 1, "finishedAt": at}
    if message is not None:
        ended["message"] = message
    return {"name": name, "state": {"terminated": ended}}


def test_the_message_is_the_runner_containers_last() -> None:
    assert message_of([]) is None
    assert message_of([_pod({"name": "runner", "state": {"running": {}}})]) is None
    assert message_of([_pod(_terminated(None))]) is None
    assert message_of([_pod(_terminated(FAILED, name="sidecar"))]) is None
    older = _pod(_terminated(FAILED, at="2026-01-01T00:00:00Z"))
    newer = _pod(_terminated(VALID, at="2026-01-01T00:01:00Z"))
    assert message_of([newer, older]) == VALID
    assert message_of([older, newer]) == VALID


def test_only_a_finished_unaccounted_job_without_a_result_is_looked_up() -> None:
    assert needs_result(b.job("apply", 1, None))
    assert not needs_result(b.job("apply", 1, "failed"))  # recorded already
    assert not needs_result(b.job("apply", 1, None, state="Running"))
    assert not needs_result(b.job("apply", 1, None, annotations={"captf.io/accounted": "true"}))


def test_with_result_leaves_the_cached_job_alone() -> None:
    job = b.job("apply", 1, None)
    recorded = with_result(job, FAILED)
    assert ANN_RESULT not in job["metadata"]["annotations"]
    assert result(recorded) == orjson.loads(FAILED)


def test_the_plan_records_each_result_read_from_a_pod_on_its_job() -> None:
    read = b.job("apply", 1, None, finished=b.ago(minutes=5))
    read["metadata"]["uid"] = uid = "job-uid-1"
    name = read["metadata"]["name"]
    shown = with_result(read, FAILED)
    snap = snapshot.build(b.captf(), [*b.base_objects(), shown])
    todo = plan_pass(snap, b.NOW, facts=Facts(results={name: FAILED}))
    assert todo.results == (Recorded(name, uid, FAILED),)
    # Accounted in the same pass, from the result the plan records first.
    assert [a.job for a in todo.accounts] == [name]
    assert plan_pass(snap, b.NOW).results == ()


def test_what_the_controller_records_is_redacted_with_the_values_the_job_carried() -> None:
    leaky = '{"outcome":"failed","message":"auth failed for token s3cr3t-value"}'
    job = b.job("apply", 1, None)
    job["metadata"]["uid"] = "job-uid-1"
    name = job["metadata"]["name"]
    [recorded] = recordings([job], {name: leaky}, lambda _: redactor(["s3cr3t-value"]))
    assert "s3cr3t-value" not in recorded.value
    assert orjson.loads(recorded.value) == {
        "outcome": "failed",
        "message": f"auth failed for token {REDACTED}",
    }
    [clean] = recordings([job], {name: VALID}, lambda _: redactor(["s3cr3t-value"]))
    assert clean.value == VALID  # nothing to hide: recorded byte for byte


def test_the_summary_is_redacted_before_its_values_are_stripped() -> None:
    leaky = orjson.dumps(
        {
            "outcome": "failed",
            "message": "x",
            "error": {"kind": "apply", "summary": "denied for correcthorsebattery"},
        }
    ).decode()
    job = b.job("apply", 1, None)
    name = job["metadata"]["name"]
    [recorded] = recordings([job], {name: leaky}, lambda _: redactor(["correcthorsebattery"]))
    assert orjson.loads(recorded.value)["error"]["summary"] == f"denied for {REDACTED}"


def test_a_failure_with_a_result_of_its_own_keeps_the_usual_event() -> None:
    job = with_result(b.job("apply", 1, None), FAILED)
    assert classify(job).event == "JobFailed"
