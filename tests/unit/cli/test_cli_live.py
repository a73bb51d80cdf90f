"""The command line's live read: one `Source` for where, and on whose timeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.cli.live import Source, listed, read_snapshot
from controller.core.basics.names import CLUSTER, TIME_ORIGIN
from controller.io import api
from runtime.jsonobj import Json


class Answers:
    """A transport that answers GETs from a table of paths and records what it was asked."""

    def __init__(self, answers: dict[str, Json]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, Any]] = []

    async def request(self, method: str, path: str, *, params: Any = None, **_: Any) -> Json:
        assert method == "GET", method
        self.asked.append((path, params))
        return self.answers[path]


async def test_at_scale_one_now_is_the_wall_clock_and_nothing_is_read() -> None:
    t = Answers({})
    before = datetime.now(UTC)
    now = await Source(kubeconfig=None, namespace="ns").now(t)  # type: ignore[arg-type]
    assert before <= now <= datetime.now(UTC)
    assert t.asked == []


async def test_a_scaled_source_reads_the_controllers_timeline() -> None:
    origin = datetime.now(UTC) - timedelta(minutes=1)
    path = f"/api/v1/namespaces/ctl/configmaps/{TIME_ORIGIN}"
    t = Answers({path: {"data": {"origin": origin.strftime("%Y-%m-%dT%H:%M:%S.%f%z")}}})
    source = Source(kubeconfig=None, namespace=None, time_scale=30.0, controller_namespace="ctl")
    now = await source.now(t)  # type: ignore[arg-type]
    assert [p for p, _ in t.asked] == [path]
    assert now - origin >= timedelta(minutes=30)


async def test_listed_items_carry_their_kind() -> None:
    path = api.object_path(CLUSTER, None)
    t = Answers(
        {
            path: {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "items": [{"metadata": {"name": "a"}}],
            }
        }
    )
    [item] = await listed(t, api.OBJECTS[CLUSTER], CLUSTER, None, labelSelector="x")  # type: ignore[arg-type]
    assert item == {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": CLUSTER,
        "metadata": {"name": "a"},
    }
    assert t.asked == [(path, {"labelSelector": "x"})]


def test_one_objects_snapshot_needs_a_namespace() -> None:
    with pytest.raises(ValueError, match="one namespace"):
        read_snapshot(CLUSTER, "c1", source=Source(kubeconfig=None, namespace=None))
