"""`captf state list|pull|push` on the real API server, as the operator's walk-through in
docs/cli.md goes: a state of three resources written in parts, pulled, one resource
removed, pushed back (refused until the object is suspended; a backup first), and each
bad push refused with nothing written."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from controller.cli.main import main
from controller.core.basics.names import CLUSTER, state_secret_name
from controller.runner import state_layout as layout
from controller.runner.kube import TransportKube
from controller.runner.state import StateStore
from runtime.envtest import ApiServer
from runtime.transport import open_transport
from tests.kube.harness import Kube

pytestmark = pytest.mark.kube
MERGE = "application/merge-patch+json"


def tfstate(serial: int, names: list[str], lineage: str = "l-1", pad: int = 0) -> bytes:
    resources = [
        {
            "mode": "managed",
            "type": "terraform_data",
            "name": name,
            "instances": [{"attributes": {"input": os.urandom(pad).hex()}}],
        }
        for name in names
    ]
    doc = {"version": 4, "serial": serial, "lineage": lineage, "resources": resources}
    return (json.dumps(doc, indent=2) + "\n").encode()


async def _write(server: ApiServer, ns: str, data: bytes) -> None:
    """The runner's write, as a Job of c1 makes it."""
    async with open_transport(str(server.kubeconfig)) as transport:
        store = StateStore(
            TransportKube(transport, ns),
            secret_name=state_secret_name(ns, CLUSTER, "c1"),
            object_name="c1",
            object_kind=CLUSTER,
            writer="c1-apply-00000001",
        )
        await store.save(await store.load(), data, "h1")


async def captf(
    capsys: pytest.CaptureFixture[str], server: ApiServer, ns: str, *argv: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    args = [*argv, "-n", ns, "--kubeconfig", str(server.kubeconfig)]
    status = await asyncio.to_thread(main, args)
    out, err = capsys.readouterr()
    return status, out, err


async def test_remove_a_resource_and_push_it_back(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster()
    original = tfstate(4, ["a", "b", "c"], pad=400_000)  # 2.4 MB of hex: parts
    await _write(apiserver, namespace, original)
    state = state_secret_name(namespace, CLUSTER, "c1")

    status, out, err = await captf(capsys, apiserver, namespace, "state", "list", "tfc/c1")
    assert status == 0, err
    [row] = [line for line in out.splitlines() if line.startswith("state")]
    assert row.split()[1:3] == ["4", str(len(original))]
    assert "c1-apply-00000001" in row

    pulled = tmp_path / "state.json"
    status, _, _ = await captf(capsys, apiserver, namespace, "state", "pull", "tfc/c1", str(pulled))
    assert status == 0
    assert pulled.read_bytes() == original

    edited = json.loads(pulled.read_bytes())
    edited["resources"] = [r for r in edited["resources"] if r["name"] != "b"]
    edited["serial"] = 5
    pushed = tmp_path / "edited.json"
    pushed.write_text(json.dumps(edited))

    status, _, err = await captf(
        capsys, apiserver, namespace, "state", "push", "tfc/c1", str(pushed)
    )
    assert status == 1
    assert "neither paused nor suspended" in err
    await kube.call(
        "PATCH", kube.captf_path("terraformclusters", "c1"), {"spec": {"suspend": True}}, MERGE
    )

    bad = {
        "lower serial": tfstate(3, ["a"]),
        "other lineage": tfstate(9, ["a"], lineage="l-2"),
        "same serial, other content": tfstate(4, ["a"]),
        "not JSON": b"{not json",
    }
    said = {
        "lower serial": "below the current serial 4",
        "other lineage": "lineage 'l-2' is not the current state's 'l-1'",
        "same serial, other content": "is the current one, with other content",
        "not JSON": "not JSON",
    }
    for case, data in bad.items():
        path = tmp_path / "bad.json"
        path.write_bytes(data)
        status, _, err = await captf(
            capsys, apiserver, namespace, "state", "push", "tfc/c1", str(path)
        )
        assert status == 1, case
        assert said[case] in err, (case, err)
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(layout.MAX_STATE_BYTES + 1)
    status, _, err = await captf(capsys, apiserver, namespace, "state", "push", "tfc/c1", str(huge))
    assert status == 1
    assert f"{layout.MAX_STATE_BYTES + 1} bytes, over the maximum" in err
    status, _, _ = await captf(capsys, apiserver, namespace, "state", "pull", "tfc/c1", str(pulled))
    assert pulled.read_bytes() == original  # none of them wrote anything

    status, out, err = await captf(
        capsys, apiserver, namespace, "state", "push", "tfc/c1", str(pushed)
    )
    assert status == 0, err
    assert "state serial 5 pushed; the state it replaced is backup serial 4" in out
    status, _, _ = await captf(capsys, apiserver, namespace, "state", "pull", "tfc/c1", str(pulled))
    assert [r["name"] for r in json.loads(pulled.read_bytes())["resources"]] == ["a", "c"]
    backup = tmp_path / "backup.json"
    status, _, _ = await captf(
        capsys, apiserver, namespace, "state", "pull", "tfc/c1", str(backup), "--serial", "4"
    )
    assert backup.read_bytes() == original
    status, out, _ = await captf(capsys, apiserver, namespace, "state", "list", "tfc/c1")
    lines = out.splitlines()[1:]
    assert [line.split()[:2] for line in lines] == [["state", "5"], ["backup", "4"]]
    assert "captf state push" in lines[0]
    secret = await kube.secret(state)
    assert secret["metadata"]["annotations"]["captf.io/inputs-hash"] == "h1"
