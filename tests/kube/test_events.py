"""The Event recorder's body is accepted by the real API server's validation."""

from __future__ import annotations

import pytest

from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.events import EventRecorder, object_reference
from runtime.transport import open_transport

pytestmark = pytest.mark.kube


async def test_warning_event_is_written_and_lists_under_the_object(
    apiserver: ApiServer, namespace: str
) -> None:
    cm = apiserver.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target"}},
    )
    cm.setdefault("apiVersion", "v1")
    cm.setdefault("kind", "ConfigMap")
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        recorder = EventRecorder(transport, component="captf-test", clock=LoopClock())
        await recorder.warning(object_reference(cm), "ReconcileError", "ValueError: bad spec")
        events = await transport.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/events",
            params={"fieldSelector": "involvedObject.name=target"},
        )
    (event,) = events["items"]
    assert (event["type"], event["reason"]) == ("Warning", "ReconcileError")
    assert event["message"] == "ValueError: bad spec"
    assert event["involvedObject"]["uid"] == cm["metadata"]["uid"]
    assert event["source"]["component"] == "captf-test"
