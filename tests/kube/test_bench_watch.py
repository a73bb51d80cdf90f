"""`captf bench watch` end to end on a few Jobs: it creates them, measures both clients, reports."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from runtime.envtest import ApiServer

pytestmark = pytest.mark.kube


def test_bench_creates_the_jobs_and_reports_both_clients(
    apiserver: ApiServer, namespace: str
) -> None:
    command = [sys.executable, "-m", "controller.cli.main", "bench", "watch"]
    args = ["--objects", "40", "--namespace", namespace, "--kubeconfig", str(apiserver.kubeconfig)]
    done = subprocess.run(command + args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    report = orjson.loads(line)
    jobs = apiserver.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    assert len(jobs) == 40
    assert all(job["spec"]["suspend"] is True for job in jobs)
    assert all("captf.io/bench-burst" in job["metadata"]["labels"] for job in jobs)
    assert report["objects"] == 40
    for phase in ("list", "watch"):
        assert report[phase]["ours_per_s"] > 0
        assert report[phase]["kubernetes_asyncio_per_s"] > 0
    memory = report["bytes_per_cached_job"]
    # Both caches hold 40 Jobs of roughly 3-7 KB each as JSON: a few KB per Job at least.
    assert 1_000 < memory["ours"] < memory["kubernetes_asyncio"]
