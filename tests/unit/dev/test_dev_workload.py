"""The Cluster API side of `make run`: the timeline's phase and replica lines, and the
stand-in workload cluster's objects (modules, kubeconfig Secret, Nodes). Pure."""

from __future__ import annotations

import base64
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.cli.main import main
from controller.dev import workload
from controller.dev.node import registration
from controller.dev.phases import lines_of
from controller.dev.timeline import Timeline
from runtime.clock import SteppedClock
from runtime.jsonobj import Json


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


# A module directory as files by relative path: text is written as UTF-8, bytes as they are,
# and a path ending in "/" is an (empty) directory.
Tree = dict[str, str | bytes]
MAIN = 'output "health" {\n  value = null\n}\n'
LIMIT = workload.CONFIGMAP_LIMIT


def _write(root: Path, tree: Tree) -> None:
    root.mkdir()
    for rel, content in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            path.mkdir(exist_ok=True)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.mark.parametrize(
    ("tree", "keys", "error"),
    [
        # Every file at the top is carried, whatever its suffix; .tf.json is configuration.
        ({"main.tf": MAIN, "README.md": "# x\n", ".terraform.lock.hcl": ""}, 3, None),
        ({"main.tf.json": "{}"}, 1, None),
        ({"main.tf": "# é, UTF-8\n"}, 1, None),
        # Keys and values together may reach the limit, not pass it.
        ({"main.tf": "x" * (LIMIT - len("main.tf"))}, 1, None),
        ({"main.tf": "x" * (LIMIT - len("main.tf") + 1)}, 0, "over the 1048576"),
        ({"README.md": "# x\n"}, 0, "no .tf file"),
        ({}, 0, "no .tf file"),
        ({"main.tf": MAIN, "test/root/main.tf.json": "{}"}, 0, "test: is a directory"),
        ({"main.tf": MAIN, ".terraform/": ""}, 0, ".terraform: is a directory"),
        ({"main.tf": MAIN, "logo.png": b"\x89PNG\r\n\x1a\n\xff"}, 0, "logo.png: not UTF-8"),
        ({"main.tf": MAIN, "my vars.tf": ""}, 0, "my vars.tf: the name is not a ConfigMap key"),
    ],
)
def test_a_module_directory_reads_as_a_configmap_s_data_or_says_why_not(
    tmp_path: Path, tree: Tree, keys: int, error: str | None
) -> None:
    module = tmp_path / "machine"
    _write(module, tree)
    if error is None:
        files = workload.read_module(module)
        assert len(files) == keys
        assert all(files[rel] == content for rel, content in tree.items())
        return
    with pytest.raises(workload.ModuleDirInvalid, match=error) as raised:
        workload.read_module(module)
    assert "\n" not in str(raised.value)


def test_a_modules_directory_needs_every_role(tmp_path: Path) -> None:
    with pytest.raises(workload.ModuleDirInvalid, match="no such directory"):
        workload.module_configmaps(tmp_path / "absent")
    for role in ("cluster", "machine"):
        _write(tmp_path / role, {"main.tf": MAIN})
    with pytest.raises(workload.ModuleDirInvalid, match="machinepool: no such directory"):
        workload.module_configmaps(tmp_path)
    _write(tmp_path / "machinepool", {"main.tf": MAIN, "versions.tf": ""})
    configmaps = workload.module_configmaps(tmp_path)
    assert [cm["metadata"]["name"] for cm in configmaps] == [
        "captf-module-cluster",
        "captf-module-machine",
        "captf-module-machinepool",
    ]
    assert set(configmaps[2]["data"]) == {"main.tf", "versions.tf"}


def test_make_run_refuses_bad_modules_in_one_line_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dev", "run", "--modules", str(tmp_path / "absent")]) == 2
    out, err = capsys.readouterr()
    # Nothing was built or started: the first thing run prints is about building OpenTofu.
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("captf dev run: --modules: ")


def test_the_version_a_machine_or_a_pool_asks_its_machines_to_run() -> None:
    machine = {"kind": "Machine", "spec": {"version": "v1.35.0", "providerID": "a://1"}}
    pool = {"kind": "MachinePool", "spec": {"template": {"spec": {"version": "v1.34.2"}}}}
    assert workload.asked_version(machine) == "v1.35.0"
    assert workload.asked_version(pool) == "v1.34.2"
    assert workload.asked_version(_machine("Running", "a://1")) == ""
    assert workload.asked_version({"kind": "MachinePool", "spec": {}}) == ""


def test_a_node_reports_the_kubelet_version_it_is_given() -> None:
    now = datetime(2026, 6, 1, 2, 0, 0, tzinfo=UTC)
    stand_in = registration.node_status({}, "n", "127.0.0.1", now, "v1.35.0")
    assert stand_in["nodeInfo"]["kubeletVersion"] == "v1.35.0"
    # The process node's own Node keeps its own.
    own = registration.node_status({}, "n", "127.0.0.1", now)
    assert own["nodeInfo"]["kubeletVersion"] == registration.NODE_VERSION


def _cluster(available: str | None, reason: str = "") -> Json:
    conditions = [{"type": "Available", "status": available, "reason": reason}]
    return {"kind": "Cluster", "status": {"conditions": conditions if available else []}}


@pytest.mark.parametrize(
    ("before", "after", "lines"),
    [
        (None, _cluster("False", "NotAvailable"), []),
        (_cluster("False", "NotAvailable"), _cluster("Unknown", "AvailableUnknown"), []),
        (_cluster("False", "NotAvailable"), _cluster("True", "Available"), ["Available True"]),
        (None, _cluster("True", "Available"), ["Available True"]),
        (_cluster("True", "Available"), _cluster("True", "Available"), []),
        (
            _cluster("True", "Available"),
            _cluster("False", "NotAvailable"),
            ["Available False (NotAvailable)"],
        ),
    ],
)
def test_a_cluster_s_availability_reads_when_it_becomes_true_and_when_it_stops(
    before: Json | None, after: Json, lines: list[str]
) -> None:
    assert lines_of(before, after) == lines
    # A Machine's Available condition is not the timeline's to print.
    assert lines_of(None, after | {"kind": "Machine"}) == []
