"""`captf bench capi` at a small N (controller/bench/capi.py): not its timings, its
invariants. Every phase finishes; each Machine had exactly one apply Job and one destroy
Job; the ratios, latencies, memory, reconciles, the runner's overhead and where the CPU went
(the busiest process per phase, the runner's own CPU against its OpenTofu's) are all there.
It runs the whole `make run` machinery (control plane, Cluster API's manager, the
controller's Deployment on the process node, the registry), as `make bench-capi` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.kube, pytest.mark.capi]
REPO = Path(__file__).resolve().parents[2]
MACHINES = 3
BENCH = (sys.executable, "-m", "controller.cli.main", "bench", "capi")


def test_the_bench_at_three_machines_keeps_its_invariants(
    tofu_build: Path, capi_build: Path, registry_build: Path
) -> None:
    done = subprocess.run(
        [*BENCH, "--machines", str(MACHINES)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=REPO,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(lines[-1])
    assert done.returncode == 0, (report, done.stderr[-4000:])
    assert set(report["phases"]) == {"ready", "scale_up", "scale_down", "bare_tofu"}
    assert all(phase["finished"] for phase in report["phases"].values()), report["phases"]
    assert report["finished"] is True
    each_way = {"apply": {"1": MACHINES}, "destroy": {"1": MACHINES}}
    assert report["jobs_per_machine"] == each_way
    assert report["one_job_each_way"] is True
    for ratio in ("ratio_controller_to_capi", "ratio_controller_to_apiserver"):
        assert report[ratio] > 0, ratio
    for process in ("controller", "capi", "apiserver"):
        assert report["cpu_s_per_machine"][process] > 0, process
    latency = report["machine_to_apply_job_s"]
    assert latency["count"] == MACHINES
    assert latency["p99"] >= latency["p50"] >= 0
    assert report["reconciles_per_machine"] > 0
    # The same reconciles by kind and by trigger (captf_reconciles_total), each summing
    # to the whole, up to each entry's rounding.
    by = report["reconciles_per_machine_by"]
    assert by["kind"]["TerraformMachine"] > 0
    kinds, triggers = sum(by["kind"].values()), sum(by["trigger"].values())
    assert kinds == pytest.approx(triggers, abs=0.01 * len(by["trigger"]))
    assert sum(by["kind_trigger"].values()) == pytest.approx(
        kinds, abs=0.01 * len(by["kind_trigger"])
    )
    assert latency["slots_unheld"]["count"] <= latency["slots_free"]["count"]
    held = report["finished_to_accounted_s"]
    assert held["count"] >= 2 * MACHINES  # each Machine's apply and destroy, at least
    assert report["rss_mib"]["peak"] >= report["rss_mib"]["settled"] > 0
    runner = report["runner"]
    assert runner["cpu_s_per_apply_job"] > 0
    assert runner["tofu_cpu_s_per_run"] > 0
    assert "overhead_ratio" in runner
    assert report["busiest_in_scale_up"] in report["cpu_s"]["scale_up"]
    # Where the CPU went: the busiest process of each phase, and each apply Job's runner
    # split into its own CPU and its OpenTofu's, read from every Machine's apply pod log.
    where = report["bottleneck"]
    for phase in ("scale_up", "scale_down"):
        busiest = where["phases"][phase]
        assert busiest["busiest"] in report["cpu_s"][phase], busiest
        assert 0 < busiest["share"] <= 1, busiest
        assert busiest["cores_busy"] > 0, busiest
    split = where["runner"]
    assert split["jobs"] == MACHINES, split
    assert split["own_s_per_job"] > 0, split
    assert split["tofu_s_per_job"] > 0, split
    assert split["busiest"] in ("runner", "tofu")
    assert all(unmet["value"] >= unmet["target"] for unmet in where["unmet"].values())
