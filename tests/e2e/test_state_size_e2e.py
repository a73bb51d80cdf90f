"""States of 5 MiB and 40 MiB with real OpenTofu on the real API server: `captf runner`
applies, drift-checks, applies again (a backup), restores and destroys, and the state
is read back whole from its parts after each step (docs/state.md). One size at a time:
a 40 MiB state holds a few hundred MB in tofu and the runner together."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from controller.core.spec.inputs import Inputs
from runtime.envtest import ApiServer
from tests.e2e.test_runner_cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

MiB = 1024 * 1024
# Each instance's input: 4,096 SHA-512 hex digests, 512 KiB that gzip halves at best; the
# state holds it twice (input and output), so `count` instances make about `count` MiB.
BIG_MODULE = """\
variable "dir" {
  type = string
}
variable "count_mib" {
  type = number
}
variable "salt" {
  type    = string
  default = "a"
}
resource "terraform_data" "big" {
  count = var.count_mib
  # range() stops at 1,024 elements: 64 lists of 64.
  input = join("", flatten([
    for i in range(64) : [for j in range(64) : sha512("${var.salt}-${count.index}-${i}-${j}")]
  ]))
}
"""


class BigCluster(Cluster):
    def inputs(self, **variables: Any) -> Inputs:
        inputs = Inputs(
            module={"main.tf": BIG_MODULE}, variables={"dir": str(self.infra), **variables}
        )
        data = {k: base64.b64encode(v).decode() for k, v in inputs.secret_data().items()}
        meta = {
            "name": f"c-inputs-{inputs.hash8}",
            "annotations": {"captf.io/inputs-hash": inputs.hash},
            "labels": {"captf.io/kind": "TerraformCluster", "captf.io/name": "c"},
        }
        body = {"metadata": meta, "data": data, "immutable": True}
        self.api.request("POST", f"/api/v1/namespaces/{self.ns}/secrets", body)
        return inputs

    def size(self, name: str = "c-state") -> int:
        """The state's size in bytes, as its manifest records it."""
        manifest = json.loads(base64.b64decode(self.secret(name)["data"]["manifest.json"]))
        return int(manifest["size"])

    def ours(self) -> list[str]:
        return sorted(
            s["metadata"]["name"]
            for s in self.secrets()
            if s["metadata"]["name"].startswith("c-state")
        )


@pytest.mark.parametrize("mib", [5, 40])
def test_a_large_state_applies_drifts_backs_up_restores_and_destroys(
    apiserver: ApiServer, namespace: str, tofu_build: Path, tmp_path: Path, mib: int
) -> None:
    cluster = BigCluster(apiserver, namespace, tofu_build, tmp_path)
    first = cluster.inputs(count_mib=mib)
    code, applied = cluster.run("apply", first)
    assert (code, applied["outcome"]) == (0, "succeeded"), applied
    state = cluster.state()
    assert state["serial"] == applied["stateSerial"]
    assert len(state["resources"][0]["instances"]) == mib
    assert cluster.size() >= mib * MiB
    parts = [n for n in cluster.ours() if "-part-" in n]
    assert len(parts) >= 2

    code, drift = cluster.run("drift", first)
    assert (code, drift["outcome"], drift.get("drift")) == (0, "succeeded", False), drift

    second = cluster.inputs(count_mib=mib, salt="b")
    code, reapplied = cluster.run("apply", second)
    assert (code, reapplied["outcome"]) == (0, "succeeded"), reapplied
    backup = f"c-state-{applied['stateSerial']}"
    assert cluster.state(backup)["resources"] == state["resources"]
    changed = cluster.state()["resources"][0]["instances"][0]["attributes"]["input"]
    assert changed != state["resources"][0]["instances"][0]["attributes"]["input"]

    serial = str(applied["stateSerial"])
    code, restored = cluster.run("restore", first, CAPTF_RESTORE_SERIAL=serial)
    assert (code, restored["outcome"]) == (0, "succeeded"), restored
    back = cluster.state()
    assert back["serial"] == restored["stateSerial"] > reapplied["stateSerial"]
    assert back["resources"] == state["resources"]

    code, destroyed = cluster.run("destroy", first)
    assert (code, destroyed["outcome"]) == (0, "succeeded"), destroyed
    assert cluster.ours() == []  # the state, its backups and every part
