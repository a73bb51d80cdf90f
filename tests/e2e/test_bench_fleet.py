"""`captf bench fleet` at a small fleet (controller/bench/fleet.py): not its timings, its
invariants. Every phase finishes; each scale-up's Machines each got an apply Job; the
hold ran background Jobs of each kind, each one pod, never more than their share of the
slots (the default 0.5 of 10); the stretch of the fleet's identity, the CPU and memory
of each process and what the Jobs cost the API server are all there. It runs the whole
`make run` machinery, as `make bench-fleet` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.kube, pytest.mark.capi]
REPO = Path(__file__).resolve().parents[2]
BENCH = (sys.executable, "-m", "controller.cli.main", "bench", "fleet")


def test_the_bench_of_a_small_fleet_keeps_its_invariants(
    tofu_build: Path, capi_build: Path, registry_build: Path
) -> None:
    args = ["--machines", "4", "--clusters", "2", "--hours", "0.5", "--scale-up", "1"]
    done = subprocess.run(
        [*BENCH, *args], capture_output=True, text=True, timeout=1800, cwd=REPO, check=False
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(lines[-1])
    assert done.returncode == 0, (report, done.stderr[-4000:])
    assert set(report["phases"]) == {"ready", "scale_up_quiet", "scale_up_held", "hold"}
    assert all(phase["finished"] for phase in report["phases"].values()), report["phases"]
    for name in ("schedules_on", "schedules_off"):
        waits = report["change_wait_s"][name]
        assert waits["count"] == waits["machines"] == 2, name
        assert waits["p99"] >= waits["p50"] >= 0, name
    hold = report["hold"]
    assert hold["controller_hours"] >= 0.5
    assert set(hold["background_jobs_per_hour"]) >= {"drift", "health"}
    assert hold["pods_per_hour"] > 0
    assert hold["slot_occupancy"]["background_max"] <= 5
    assert hold["api_requests_per_job"]["controller"]["total"] > 0
    # Every background Job is launched by a pass its schedule woke (a timed requeue).
    woken = hold["reconciles_per_job"]
    assert woken["total"] >= woken["requeue"] > 0, woken
    assert report["stretch"] == {"identity fleet": 1.0}
    for process in ("controller", "capi", "apiserver"):
        assert hold["cpu_s_per_machine_hour"][process] > 0, process
    assert report["rss_mib"]["controller_peak"] > 0
    assert len(report["load_average"]["start"]) == 3
