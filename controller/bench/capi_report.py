"""The figures of `captf bench capi`'s JSON line, from what its phases measured (see
controller/bench/capi.py and docs/performance.md)."""

from __future__ import annotations

from typing import Any

from controller.bench.capi_watch import Seen, percentile

MEASURED = ("controller", "capi", "apiserver")


def summarise(report: dict[str, Any], seen: Seen, reconciles: float, slots: int) -> None:
    """Adds the per-Machine figures, the ratios, the latencies, the Jobs per Machine, the
    runner's overhead and the busiest process to `report`."""
    n = max(int(report["machines"]), 1)
    laps = [report["cpu_s"].get(p, {}) for p in ("scale_up", "scale_down")]
    total = {name: sum(lap.get(name, 0.0) for lap in laps) for name in MEASURED}
    per = {name: round(total[name] / n, 4) for name in MEASURED}
    report["cpu_s_per_machine"] = per
    report["ratio_controller_to_capi"] = _ratio(per["controller"], per["capi"])
    report["ratio_controller_to_apiserver"] = _ratio(per["controller"], per["apiserver"])
    every, free, unheld = seen.machine_to_job(slots)
    report["machine_to_apply_job_s"] = {
        "p50": percentile(every, 50),
        "p99": percentile(every, 99),
        "count": len(every),
        "slots_free": {
            "p50": percentile(free, 50),
            "p99": percentile(free, 99),
            "count": len(free),
        },
        "slots_unheld": {
            "p50": percentile(unheld, 50),
            "p99": percentile(unheld, 99),
            "count": len(unheld),
        },
    }
    held = seen.finished_to_accounted()
    report["finished_to_accounted_s"] = {
        "p50": percentile(held, 50),
        "p99": percentile(held, 99),
        "count": len(held),
    }
    report["machine_to_apply_job_s"]["breakdown"] = seen.breakdown()
    report["reconciles_per_machine"] = round(reconciles / n, 2)
    machines = set(seen.machines)
    each = {op: seen.jobs_per_machine(op, machines) for op in ("apply", "destroy")}
    report["jobs_per_machine"] = each
    report["one_job_each_way"] = all(
        counts == {"1": len(machines)} for counts in each.values()
    ) and len(machines) == int(report["machines"])
    report["runner"] = _runner(report, n)
    up = report["cpu_s"].get("scale_up", {})
    report["busiest_in_scale_up"] = max(up, key=up.get) if up else None


def _runner(report: dict[str, Any], n: int) -> dict[str, Any]:
    """CPU seconds per apply Job of a runner pod (with its OpenTofu) against OpenTofu's
    own per bare run: the overhead is what the runner adds, as a fraction of OpenTofu's."""
    runners = report["cpu_s"].get("scale_up", {}).get("runners")
    tofu = report["cpu_s"].get("bare_tofu", {}).get("tofu")
    if runners is None or not tofu:
        return {}
    per_job, per_run = runners / n, tofu / n
    return {
        "cpu_s_per_apply_job": round(per_job, 3),
        "tofu_cpu_s_per_run": round(per_run, 3),
        "overhead_ratio": round(per_job / per_run - 1, 3),
    }


def _ratio(ours: float, theirs: float) -> float | None:
    return round(ours / theirs, 3) if theirs else None
