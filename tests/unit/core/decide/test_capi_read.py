"""What a pass reads of a Cluster API object (reads.capi_read): its metadata and spec
whole, of its status only `initialization`."""

from __future__ import annotations

import pytest

from controller.core.basics.names import CAPI_MACHINE
from controller.core.decide.reads import capi_read
from runtime.jsonobj import Json

CONDITIONS = [{"type": "Available", "status": "False", "reason": "Scaling"}]


@pytest.mark.parametrize(
    ("status", "kept"),
    [
        (None, None),
        ({}, "absent"),
        ({"initialization": {"infrastructureProvisioned": True}}, None),
        (
            {"initialization": {"controlPlaneInitialized": True}, "phase": "Provisioned"},
            {"initialization": {"controlPlaneInitialized": True}},
        ),
        ({"phase": "Running", "conditions": CONDITIONS, "nodeRef": {"name": "n"}}, "absent"),
    ],
)
def test_capi_read_keeps_only_the_status_a_pass_reads(
    status: Json | None, kept: Json | str | None
) -> None:
    """`kept` None: the object as it was (nothing to drop); "absent": no status at all."""
    obj: Json = {
        "kind": CAPI_MACHINE,
        "metadata": {"name": "m", "resourceVersion": "1"},
        "spec": {"version": "v1"},
    }
    if status is not None:
        obj["status"] = status
    read = capi_read(obj)
    assert read["metadata"] == obj["metadata"]
    assert read["spec"] == obj["spec"]
    if kept == "absent":  # no status read is no status at all
        assert "status" not in read
    else:
        assert read.get("status") == (status if kept is None else kept)


def test_capi_read_leaves_out_cluster_apis_finalizers() -> None:
    meta = {"name": "m", "finalizers": ["machine.cluster.x-k8s.io"], "labels": {"a": "b"}}
    read = capi_read({"kind": CAPI_MACHINE, "metadata": meta, "spec": {}})
    assert read["metadata"] == {"name": "m", "labels": {"a": "b"}}
    assert meta["finalizers"] == ["machine.cluster.x-k8s.io"]  # the input is left as it was


def test_capi_read_leaves_out_the_provider_ids_cluster_api_copies_from_ours() -> None:
    spec = {"providerID": "aws:///i-1", "version": "v1.34.0", "providerIDList": ["a"]}
    read = capi_read({"kind": CAPI_MACHINE, "metadata": {"name": "m"}, "spec": spec})
    assert read["spec"] == {"version": "v1.34.0"}
