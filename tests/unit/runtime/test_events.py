"""The Event recorder: the body it writes, and that failures never propagate."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runtime.clock import ManualClock
from runtime.errors import ApiError
from runtime.events import EventErrorReporter, EventRecorder, event_body, object_reference

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j1", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"},
}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-2"}}


class Recorded:
    def __init__(self, fail: bool = False) -> None:
        self.posts: list[tuple[str, Any]] = []
        self.fail = fail

    async def request(self, method: str, path: str, *, body: object = None) -> dict[str, Any]:
        if self.fail:
            raise ApiError(403, "Forbidden", "events is forbidden")
        self.posts.append((path, body))
        return {}


def test_event_body_references_the_object_in_its_namespace() -> None:
    now = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    body = event_body(
        object_reference(JOB),
        type_="Warning",
        reason="ReconcileError",
        message="x" * 5000,
        component="ctl",
        instance="pod-1",
        now=now,
    )
    assert body["metadata"] == {"generateName": "j1.", "namespace": "ns"}
    assert body["involvedObject"] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j1",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "7",
    }
    assert (body["type"], body["reason"], body["count"]) == ("Warning", "ReconcileError", 1)
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-03-01T12:00:00Z"
    assert len(body["message"]) == 1024
    assert body["message"].endswith("...")


def test_cluster_scoped_objects_get_events_in_default() -> None:
    ref = object_reference(NODE)
    assert "namespace" not in ref
    body = event_body(
        ref,
        type_="Normal",
        reason="R",
        message="m",
        component="c",
        instance="i",
        now=datetime.now(UTC),
    )
    assert body["metadata"]["namespace"] == "default"


async def test_recorder_posts_to_the_events_collection() -> None:
    api = Recorded()
    await EventRecorder(api, component="ctl", clock=ManualClock()).normal(
        object_reference(JOB), "Started", "go"
    )
    ((path, body),) = api.posts
    assert path == "/api/v1/namespaces/ns/events"
    assert (body["type"], body["reason"], body["message"]) == ("Normal", "Started", "go")


async def test_a_failed_event_is_logged_not_raised() -> None:
    recorder = EventRecorder(Recorded(fail=True), component="ctl", clock=ManualClock())
    await recorder.warning(object_reference(JOB), "R", "m")


async def test_error_reporter_emits_a_warning_on_the_keyed_object_only_if_it_exists() -> None:
    api = Recorded()
    recorder = EventRecorder(api, component="ctl", clock=ManualClock())
    cache = {"ns/j1": JOB}
    reporter = EventErrorReporter(recorder, cache.get)
    await reporter.unrecognized_error("ns/gone", ValueError("bad"))
    assert api.posts == []
    await reporter.unrecognized_error("ns/j1", ValueError("bad spec"))
    ((_, body),) = api.posts
    assert (body["type"], body["reason"]) == ("Warning", "ReconcileError")
    assert body["message"] == "ValueError: bad spec"
    assert body["involvedObject"]["uid"] == "u-1"
