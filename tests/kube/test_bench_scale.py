"""`captf bench scale` end to end on a few objects: its own API server, one JSON line last."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

pytestmark = pytest.mark.kube

KEYS = {
    "objects",
    "startup_s",
    "startup_writes",
    "rss_mib_idle_empty",
    "rss_mib_settled",
    "rss_mib_peak",
    "bytes_per_cached_job",
    "p50_change_ms",
    "p99_change_ms",
    "reconciles_per_change",
    "max_gc_pause_ms",
    "ingest_vs_kubernetes_asyncio",
    "ingest_vs_floor",
}


def test_bench_scale_reports_every_figure_of_an_idle_fleet() -> None:
    command = [sys.executable, "-m", "controller.cli.main", "bench", "scale"]
    args = ["--objects", "20", "--rate", "5", "--seconds", "2"]
    done = subprocess.run(command + args, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout.splitlines()[-1])
    assert set(report) >= KEYS
    assert report["objects"] == 20
    assert report["cached_jobs"] == 60
    # Idle objects: one status write each at start-up, every change answered once.
    assert report["startup_writes"] == 20
    assert report["answered"] == report["changes"] == 10
    assert report["reconciles_per_change"] <= 1.5
    assert 0 < report["rss_mib_idle_empty"] <= report["rss_mib_peak"]
    # Where each phase's time went: the controller's CPU and its API server's, apart.
    for phase in ("startup_cpu_s", "changes_cpu_s"):
        assert set(report[phase]) == {"controller", "etcd", "kube-apiserver"}
    assert report["startup_cpu_s"]["controller"] > 0
    assert report["startup_cpu_s"]["kube-apiserver"] > 0
