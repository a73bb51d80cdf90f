"""The Cluster API side of `make run`: the timeline's phase and replica lines, and the
stand-in workload cluster's objects (modules, kubeconfig Secret, Nodes). Pure."""

from __future__ import annotations

import base64
import io
from datetime import UTC, datetime
from typing import Any

from controller.dev import workload
from controller.dev.phases import lines_of
from controller.dev.timeline import Timeline
from runtime.clock import SteppedClock

Json = dict[str, Any]


def _machine(phase: str, provider_id: str | None = None) -> Json:
    spec = {"providerID": provider_id} if provider_id else {}
    return {"kind": "Machine", "spec": spec, "status": {"phase": phase} if phase else {}}


def _pool(wanted: int, have: int, ready: int, phase: str = "Provisioned") -> Json:
    status = {"phase": phase, "replicas": have, "readyReplicas": ready}
    return {"kind": "MachinePool", "spec": {"replicas": wanted}, "status": status}


def test_a_machine_s_phases_read_as_they_move() -> None:
    pending = _machine("Pending")
    provisioning = _machine("Provisioning")
    provisioned = _machine("Provisioned", "captf://demo/m0")
    assert lines_of(None, _machine("")) == []
    assert lines_of(None, pending) == ["phase Pending"]
    assert lines_of(pending, provisioning) == ["phase Pending -> Provisioning"]
    assert lines_of(provisioning, provisioned) == [
        "phase Provisioning -> Provisioned (captf://demo/m0)"
    ]
    assert lines_of(provisioned, provisioned) == []
    assert lines_of(provisioned, None) == ["deleted"]


def test_a_pool_s_replicas_read_when_any_count_moves() -> None:
    assert lines_of(_pool(2, 0, 0), _pool(2, 2, 0)) == ["replicas 2/2 (ready 0)"]
    assert lines_of(_pool(2, 2, 0), _pool(2, 2, 2, "Running")) == [
        "phase Provisioned -> Running",
        "replicas 2/2 (ready 2)",
    ]
    assert lines_of(_pool(2, 2, 2), _pool(2, 2, 2)) == []


def test_the_timeline_prints_owner_lines_under_the_owner_s_name() -> None:
    out = io.StringIO()
    clock = SteppedClock(datetime(2026, 6, 1, 2, 0, 0, tzinfo=UTC))
    transport: Any = object()  # nothing runs: only the handler is called
    timeline = Timeline(transport, clock=clock, scale=1.0, out=out, capi=True)
    machine = _machine("Running") | {"metadata": {"name": "demo-md-0-x"}}
    timeline._on_owner("Machine")(None, machine)
    assert "Machine/demo-md-0-x" in out.getvalue()
    assert out.getvalue().rstrip().endswith("phase Running")


def test_node_names_follow_the_provider_id() -> None:
    assert workload.node_name("captf://demo/demo-md-0-abc") == "demo-demo-md-0-abc"
    assert workload.node_name("captf://demo/demo-mp-0/1") == "demo-demo-mp-0-1"
    assert workload.node_name("aws:///us-east-1a/I-0ABC") == "us-east-1a-i-0abc"
    assert len(workload.node_name("x://" + "a" * 100)) == 63
    body = workload.node("captf://demo/m0")
    assert body["spec"] == {"providerID": "captf://demo/m0"}
    assert body["metadata"]["name"] == "demo-m0"


def test_provider_ids_of_a_machine_and_a_pool() -> None:
    assert workload.provider_ids(_machine("Provisioning")) == []
    assert workload.provider_ids(_machine("Provisioned", "captf://demo/m0")) == ["captf://demo/m0"]
    pool = {"kind": "MachinePool", "spec": {"providerIDList": ["a://1", "a://2"]}}
    assert workload.provider_ids(pool) == ["a://1", "a://2"]


def test_the_kubeconfig_secret_is_what_cluster_api_reads() -> None:
    secret = workload.kubeconfig_secret("demo", b"apiVersion: v1\n")
    assert secret["metadata"]["name"] == "demo-kubeconfig"
    assert secret["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "demo"}
    assert secret["type"] == "cluster.x-k8s.io/secret"
    assert base64.b64decode(secret["data"]["value"]) == b"apiVersion: v1\n"


def test_a_module_configmap_holds_the_role_s_files() -> None:
    cm = workload.module_configmap("machine")
    assert cm["metadata"]["name"] == "captf-module-machine"
    assert set(cm["data"]) == {"main.tf", "variables.tf"}
    assert 'output "provider_id"' in cm["data"]["main.tf"]
