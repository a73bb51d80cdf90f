"""The bench's `bottleneck` object from a report's figures and runner pod logs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from controller.bench.capi_bottleneck import bottleneck, runner_split, where_said
from controller.runner import cpu


def _report(**figures: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "phases": {"scale_up": {"wall_s": 10.0}, "scale_down": {"wall_s": 5.0}},
        "cpu_s": {
            "scale_up": {"controller": 1.0, "apiserver": 4.0, "runners": 5.0},
            "scale_down": {"controller": 1.0, "apiserver": 3.0, "runners": 1.0},
        },
    }
    return report | figures


def _log(tmp_path: Path, name: str, own: float, tofu: float) -> Path:
    path = tmp_path / name
    times = os.times_result((own, 0.0, tofu, 0.0, 0.0))
    path.write_text(f"$ tofu apply\ncaptf-runner: result {{}}\n{cpu.line(times)}\n")
    return path


def test_each_phase_names_its_busiest_process_with_its_share_and_the_cores_kept_busy() -> None:
    where = bottleneck(_report(), [])
    cores = where["cores"]
    assert where["phases"]["scale_up"] == {
        "busiest": "runners",
        "cpu_s": 5.0,
        "share": 0.5,
        "cores_busy": round(10.0 / (10.0 * cores), 3),
    }
    assert where["phases"]["scale_down"]["busiest"] == "apiserver"
    assert where["phases"]["scale_down"]["share"] == 0.6


@pytest.mark.parametrize(
    ("figures", "unmet"),
    [
        ({}, set()),
        # "at most 0.5 times": a ratio at the target meets it; "under 1 s" does not
        ({"ratio_controller_to_capi": 0.5, "ratio_controller_to_apiserver": 0.25}, set()),
        ({"ratio_controller_to_capi": 0.501}, {"controller_to_capi"}),
        (
            {"ratio_controller_to_capi": 0.9, "ratio_controller_to_apiserver": 0.2},
            {"controller_to_capi"},
        ),
        (
            {"runner": {"overhead_ratio": 0.5}, "rss_mib": {"peak": 80.0}},
            {"runner_overhead_ratio"},
        ),
        (
            {"machine_to_apply_job_s": {"slots_free": {"p99": 1.0}}, "runner": {}},
            {"machine_to_apply_job_p99_slots_free_s"},
        ),
    ],
)
def test_unmet_targets_are_listed_with_their_figures(
    figures: dict[str, Any], unmet: set[str]
) -> None:
    found = bottleneck(_report(**figures), [])["unmet"]
    assert set(found) == unmet
    assert all(v["value"] >= v["target"] for v in found.values())


def test_the_runner_split_averages_the_cpu_lines_of_the_logs_that_have_one(
    tmp_path: Path,
) -> None:
    logs = [
        _log(tmp_path, "a.log", 0.2, 0.3),
        _log(tmp_path, "b.log", 0.4, 0.1),
        tmp_path / "gone.log",  # never written: a pod whose log is missing
    ]
    (tmp_path / "old.log").write_text("captf-runner: result {}\n")  # an older runner
    split = runner_split([*logs, tmp_path / "old.log"])
    assert split == {"jobs": 2, "own_s_per_job": 0.3, "tofu_s_per_job": 0.2, "busiest": "runner"}
    assert runner_split([]) == {"jobs": 0}


def test_the_runner_split_says_its_own_over_tofu_and_what_the_pods_used_beyond_both(
    tmp_path: Path,
) -> None:
    logs = [_log(tmp_path, "a.log", 0.1, 0.2), _log(tmp_path, "b.log", 0.1, 0.2)]
    split = bottleneck(_report(runner={"cpu_s_per_apply_job": 0.35}), logs)["runner"]
    assert split["own_to_tofu"] == 0.5
    assert split["outside_s_per_job"] == 0.05
    assert split["busiest"] == "tofu"
    assert bottleneck(_report(), [])["runner"] == {"jobs": 0}


def test_the_progress_line_names_the_busiest_processes_and_the_unmet_targets(
    tmp_path: Path,
) -> None:
    logs = [_log(tmp_path, "a.log", 0.1, 0.2)]
    where = bottleneck(_report(ratio_controller_to_capi=0.9), logs)
    said = where_said(where)
    assert "scale_up runners 5.0 s (0.5 of the CPU)" in said
    assert "runner per apply Job 0.1 s own, 0.2 s OpenTofu" in said
    assert said.endswith("unmet: controller_to_capi 0.9 (target 0.5)")
    assert where_said(bottleneck(_report(), [])).endswith("unmet: none")
