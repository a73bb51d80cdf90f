"""`captf runner` as a process against the real API server: the entrypoint, the
in-cluster-style API calls (state Secret, backups), the result in the termination
message file, and a SIGTERM sent to the process during a slow apply."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controller.core.spec.inputs import Inputs
from controller.runner.binaries import runner_environ
from controller.runner.state_layout import read_body
from runtime.envtest import ApiServer
from tests.e2e.test_runner_tofu import MODULE

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

REPO = Path(__file__).resolve().parents[2]


class Cluster:
    def __init__(self, api: ApiServer, ns: str, build: Path, tmp_path: Path) -> None:
        self.api = api
        self.ns = ns
        self.build = build
        self.infra = tmp_path / "infra"
        self.infra.mkdir()
        self.results = tmp_path / "results"
        self.results.mkdir()
        self.jobs = 0

    def inputs(self, **variables: Any) -> Inputs:
        inputs = Inputs(module={"main.tf": MODULE}, variables={"dir": str(self.infra), **variables})
        data = {k: base64.b64encode(v).decode() for k, v in inputs.secret_data().items()}
        meta = {
            "name": f"c-inputs-{inputs.hash8}",
            "annotations": {"captf.io/inputs-hash": inputs.hash},
            "labels": {"captf.io/kind": "TerraformCluster", "captf.io/name": "c"},
        }
        body = {"metadata": meta, "data": data, "immutable": True}
        self.api.request("POST", f"/api/v1/namespaces/{self.ns}/secrets", body)
        return inputs

    def job(self, op: str) -> str:
        """A Job name: the runner never reads its Job, so none need exist."""
        self.jobs += 1
        return f"c-{op}-{self.jobs}"

    def start(self, op: str, inputs: Inputs, **extra: str) -> tuple[str, subprocess.Popen[bytes]]:
        job = self.job(op)
        env = {
            **os.environ,
            "KUBECONFIG": str(self.api.kubeconfig),
            "CAPTF_OP": op,
            "CAPTF_NAMESPACE": self.ns,
            "CAPTF_JOB_NAME": job,
            "CAPTF_OBJECT_NAME": "c",
            "CAPTF_OBJECT_KIND": "TerraformCluster",
            "CAPTF_INPUTS_SECRET": f"c-inputs-{inputs.hash8}",
            "CAPTF_INPUTS_HASH": inputs.hash,
            "CAPTF_STATE_SECRET": "c-state",
            "CAPTF_RESULT_FILE": str(self.results / job),
            **runner_environ(self.build),
            **extra,
        }
        argv = [sys.executable, "-m", "controller.cli.main", "runner"]
        # A session of its own, so the test can signal its process group.
        proc = subprocess.Popen(
            argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, start_new_session=True
        )
        return job, proc

    def run(self, op: str, inputs: Inputs, **extra: str) -> tuple[int, dict[str, Any]]:
        job, proc = self.start(op, inputs, **extra)
        return proc.wait(timeout=240), self.result(job)

    def result(self, job: str) -> dict[str, Any]:
        """The result the runner left as its termination message."""
        parsed: dict[str, Any] = json.loads((self.results / job).read_text())
        return parsed

    def secret(self, name: str) -> dict[str, Any]:
        return self.api.request("GET", f"/api/v1/namespaces/{self.ns}/secrets/{name}")

    def state(self, name: str = "c-state") -> dict[str, Any]:
        """The state a state (or backup) Secret holds, its parts read and checked as the
        runner reads them (controller/runner/state_layout.py)."""

        async def fetch(part: str) -> dict[str, Any] | None:
            return self.secret(part)

        body = asyncio.run(read_body(self.secret(name), fetch))
        parsed: dict[str, Any] = json.loads(body)
        return parsed

    def secrets(self, selector: str = "") -> list[dict[str, Any]]:
        params = {"labelSelector": selector} if selector else None
        path = f"/api/v1/namespaces/{self.ns}/secrets"
        items: list[dict[str, Any]] = self.api.request("GET", path, params=params)["items"]
        return items


@pytest.fixture
def cluster(apiserver: ApiServer, namespace: str, tofu_build: Path, tmp_path: Path) -> Cluster:
    return Cluster(apiserver, namespace, tofu_build, tmp_path)


def test_apply_then_reapply_through_the_api(cluster: Cluster) -> None:
    first = cluster.inputs()
    code, result = cluster.run("apply", first)
    assert (code, result["outcome"]) == (0, "succeeded"), result
    annotations = cluster.secret("c-state")["metadata"]["annotations"]
    assert annotations["captf.io/inputs-hash"] == first.hash
    assert annotations["captf.io/serial"] == str(result["stateSerial"])
    assert (cluster.infra / "managed.txt").read_text() == "hello"

    second = cluster.inputs(content="two")
    code, result = cluster.run("apply", second)
    assert (code, result["outcome"]) == (0, "succeeded"), result
    assert (cluster.infra / "managed.txt").read_text() == "two"
    backups = cluster.api.request(
        "GET",
        f"/api/v1/namespaces/{cluster.ns}/secrets",
        params={"labelSelector": "captf.io/state-backup-of=c"},
    )["items"]
    assert [b["metadata"]["annotations"]["captf.io/serial"] for b in backups] == [
        annotations["captf.io/serial"]
    ]


def test_sigterm_to_the_runner_process_ends_interrupted(cluster: Cluster) -> None:
    code, result = cluster.run("apply", cluster.inputs())
    assert code == 0, result
    serial = cluster.state()["serial"]
    job, proc = cluster.start("apply", cluster.inputs(content="changed", slow=True))
    started = cluster.infra / "slow-started"
    deadline = time.monotonic() + 120
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "the slow apply never started"
    # The whole process group, as a terminal or a local executor would: tofu
    # must still get exactly one SIGTERM (from the runner).
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) == 1
    result = cluster.result(job)
    assert result["outcome"] == "interrupted", result
    assert cluster.state()["serial"] == result["stateSerial"] > serial
    assert (cluster.infra / "managed.txt").read_text() == "changed"
