"""A TerraformCluster, a TerraformMachinePool and a TerraformMachine of one name in one
namespace, each run by `captf runner` with real OpenTofu on the real API server under
the names the controller gives them: each keeps its own state through apply, scale and
deletion (before, all three read and wrote `<name>-state`)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.core.basics.names import (
    CLUSTER,
    MACHINE,
    POOL,
    inputs_secret_prefix,
    state_secret_name,
)
from controller.core.spec.inputs import Inputs
from controller.runner.binaries import runner_environ
from runtime.envtest import ApiServer
from tests.e2e.test_runner_cluster import REPO, Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

MODULE = """\
variable "dir" {
  type = string
}
variable "size" {
  type = number
}
resource "terraform_data" "node" {
  count = var.size
  input = "node-${count.index}"
}
"""


class Kinds(Cluster):
    """Objects named `c` of each kind, with Jobs as the controller builds their names."""

    def put_inputs(self, kind: str, size: int) -> Inputs:
        inputs = Inputs(
            module={"main.tf": MODULE}, variables={"dir": str(self.infra), "size": size}
        )
        data = {k: base64.b64encode(v).decode() for k, v in inputs.secret_data().items()}
        meta = {
            "name": f"{inputs_secret_prefix(self.ns, kind, 'c')}{inputs.hash8}",
            "annotations": {"captf.io/inputs-hash": inputs.hash},
            "labels": {"captf.io/kind": kind, "captf.io/name": "c"},
        }
        body = {"metadata": meta, "data": data, "immutable": True}
        self.api.request("POST", f"/api/v1/namespaces/{self.ns}/secrets", body)
        return inputs

    def run_kind(self, kind: str, op: str, inputs: Inputs) -> dict[str, Any]:
        job = self.job(f"{kind.lower()}-{op}")
        env = {
            **os.environ,
            "KUBECONFIG": str(self.api.kubeconfig),
            "CAPTF_OP": op,
            "CAPTF_NAMESPACE": self.ns,
            "CAPTF_JOB_NAME": job,
            "CAPTF_OBJECT_NAME": "c",
            "CAPTF_OBJECT_KIND": kind,
            "CAPTF_INPUTS_SECRET": f"{inputs_secret_prefix(self.ns, kind, 'c')}{inputs.hash8}",
            "CAPTF_INPUTS_HASH": inputs.hash,
            "CAPTF_STATE_SECRET": state_secret_name(self.ns, kind, "c"),
            "CAPTF_RESULT_FILE": str(self.results / job),
            **runner_environ(self.build),
        }
        argv = [sys.executable, "-m", "controller.cli.main", "runner"]
        done = subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, timeout=240)
        result = self.result(job)
        assert (done.returncode, result["outcome"]) == (0, "succeeded"), result
        return result

    def nodes(self, kind: str) -> int:
        state = self.state(state_secret_name(self.ns, kind, "c"))
        return sum(len(r["instances"]) for r in state["resources"])


def test_three_kinds_of_one_name_keep_their_own_states(
    apiserver: ApiServer, namespace: str, tofu_build: Path, tmp_path: Path
) -> None:
    objects = Kinds(apiserver, namespace, tofu_build, tmp_path)
    sizes = {CLUSTER: 1, POOL: 2, MACHINE: 3}
    inputs = {kind: objects.put_inputs(kind, size) for kind, size in sizes.items()}
    for kind in sizes:
        objects.run_kind(kind, "apply", inputs[kind])
    assert {kind: objects.nodes(kind) for kind in sizes} == sizes
    names = {state_secret_name(namespace, kind, "c") for kind in sizes}
    assert len(names) == 3

    # Scale the pool: only its state changes (and gains a backup).
    scaled = objects.put_inputs(POOL, 5)
    objects.run_kind(POOL, "apply", scaled)
    assert {kind: objects.nodes(kind) for kind in sizes} == {CLUSTER: 1, POOL: 5, MACHINE: 3}
    backups = objects.secrets("captf.io/state-backup-of=c")
    assert [b["metadata"]["labels"]["captf.io/kind"] for b in backups] == [POOL]

    # Delete the machine: its state goes; the cluster's and the pool's stay as they were.
    objects.run_kind(MACHINE, "destroy", inputs[MACHINE])
    left = {s["metadata"]["name"] for s in objects.secrets()}
    assert state_secret_name(namespace, MACHINE, "c") not in left
    assert {kind: objects.nodes(kind) for kind in (CLUSTER, POOL)} == {CLUSTER: 1, POOL: 5}
    assert [
        b["metadata"]["labels"]["captf.io/kind"]
        for b in objects.secrets("captf.io/state-backup-of=c")
    ] == [POOL]
