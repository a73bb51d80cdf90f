"""The timed phases of `captf bench fleet` and its report (controller/bench/fleet.py says
what each phase does; docs/performance.md what each field of the JSON line is)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from controller.bench.capi_procs import Meter, memory_mib, pod_pid
from controller.bench.capi_watch import percentile
from controller.bench.fleet_audit import per_job, requests_between
from controller.bench.fleet_metrics import labelled
from controller.bench.fleet_objects import (
    CLUSTER_SCHEDULES_ON,
    NAMESPACE,
    POOL_SCHEDULES_ON,
    SCHEDULES_ON,
    cluster_name,
    deployment_name,
    per_cluster,
    pool_name,
    scale_up_of,
)
from controller.bench.fleet_watch import Fleet
from controller.core.basics.names import CAPI_GROUP, CAPI_VERSION, CLUSTER, MACHINE, POOL
from controller.dev.install import NAMESPACE as CONTROLLER_NAMESPACE
from controller.dev.replicas import CONTROLLER_PODS
from controller.io.api import OBJECTS, PODS, resource_path
from runtime.cache import Resource
from runtime.jsonobj import Json
from runtime.transport import Transport

MERGE = "application/merge-patch+json"
DEPLOYMENTS = Resource(CAPI_GROUP, CAPI_VERSION, "machinedeployments")
# The controller's gauge of each identity's stretch (absent before issue 39).
STRETCH_FAMILY = "captf_background_stretch"
# The controller's reconciles by what woke them (controller/io/triggers.py).
RECONCILES_FAMILY = "captf_reconciles"


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Phases:
    """The timed phases and the report (see the module)."""

    def __init__(
        self,
        args: argparse.Namespace,
        transport: Transport,
        fleet: Fleet,
        pids: dict[str, tuple[int, ...]],
        *,
        audit: Path,
    ) -> None:
        self.args, self.transport, self.fleet, self.pids = args, transport, fleet, pids
        self.audit = audit
        self.up = scale_up_of(args)
        self.wanted = args.machines
        self.limit = 600.0 + 6.0 * args.machines
        self.report: dict[str, Any] = {
            "machines": args.machines,
            "clusters": args.clusters,
            "scale_up_per_cluster": self.up,
            "hours": args.hours,
            "time_scale": args.time_scale,
            "job_seconds": args.job_seconds,
            "max_concurrent_runs": args.max_concurrent_runs,
            "controller_args": list(args.controller_arg or []),
            "cores": len(os.sched_getaffinity(0)),
            "load_average": {"start": _load()},
            "phases": {},
        }

    async def run(self) -> dict[str, Any]:
        ready = await self._until("ready", self._all_running, self.limit)
        controller = await self._controller_pids()
        meter = Meter({"controller": controller, **self.pids}, children=frozenset({"controller"}))
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sample, meter)
            quiet = ready and await self._scale_up("scale_up_quiet")
            on = quiet and await self._schedules_on()
            held = on and await self._hold(meter)
            tg.cancel_scope.cancel()
        self.report["stretch"] = await self._stretch()
        self.report["rss_mib"] = {
            "controller_peak": round(meter.peak_mib("controller"), 1),
            "capi_peak": round(meter.peak_mib("capi"), 1),
            "apiserver_peak": round(meter.peak_mib("apiserver"), 1),
            "controller_settled": round(
                max((memory_mib(p, "VmRSS") for p in await self._controller_pids()), default=0.0),
                1,
            ),
        }
        self.report["controller_restarts"] = meter.processes("controller") - len(controller)
        self.report["load_average"]["end"] = _load()
        self.report["finished"] = bool(ready and quiet and on and held)
        self._compare()
        return self.report

    async def _sample(self, meter: Meter) -> None:
        while True:
            for pid in await self._controller_pids():
                meter.add("controller", pid)
            meter.sample()
            self.fleet.sample()
            await anyio.sleep(1.0)

    async def _scale_up(self, name: str) -> bool:
        """Every MachineDeployment up by U; the new Machines' waits, until they run."""
        before = set(self.fleet.machines)
        self.wanted += self.up * self.args.clusters
        for index in range(self.args.clusters):
            replicas = per_cluster(self.args, index) + self.up * self._ups_done(name)
            path = resource_path(DEPLOYMENTS, NAMESPACE, deployment_name(index))
            body = {"spec": {"replicas": replicas}}
            await self.transport.request("PATCH", path, body=body, content_type=MERGE)
        finished = await self._until(name, self._all_running, self.limit)
        new = set(self.fleet.machines) - before
        self.report["phases"][name]["wait_for_apply_job_s"] = self.fleet.waits(new)
        return finished

    def _ups_done(self, name: str) -> int:
        return 1 if name == "scale_up_quiet" else 2

    async def _schedules_on(self) -> bool:
        """Every object's schedules back to their defaults (see fleet_objects)."""
        for kind, patch in (
            (MACHINE, SCHEDULES_ON),
            (POOL, POOL_SCHEDULES_ON),
            (CLUSTER, CLUSTER_SCHEDULES_ON),
        ):
            found = await self.transport.request("GET", resource_path(OBJECTS[kind], NAMESPACE))
            for obj in found["items"]:
                path = resource_path(OBJECTS[kind], NAMESPACE, obj["metadata"]["name"])
                await self.transport.request("PATCH", path, body=patch, content_type=MERGE)
        say("schedules on for every object")
        return True

    async def _hold(self, meter: Meter) -> bool:
        """H hours of controller time; the second scale-up starts halfway through and runs
        beside the rest of the hold (which lasts until it has finished too)."""
        wall = self.args.hours * 3600.0 / self.args.time_scale
        start, began = time.monotonic(), datetime.now(UTC)
        meter.lap()
        woken = await self._reconciles()
        done: list[bool] = []
        async with anyio.create_task_group() as tg:
            await self._sleep_reporting("hold", wall / 2)

            async def scale_up() -> None:
                done.append(await self._scale_up("scale_up_held"))

            tg.start_soon(scale_up)
            await self._sleep_reporting("hold", start + wall - time.monotonic())
        end, ended = time.monotonic(), datetime.now(UTC)
        cpu = meter.lap()
        woken = _less(await self._reconciles(), woken)
        hours = (end - start) * self.args.time_scale / 3600.0
        self._hold_report(start, end, hours, cpu)
        found = await anyio.to_thread.run_sync(requests_between, self.audit, began, ended)
        jobs = sum(self.report["hold"]["jobs_by_kind"].values())
        self.report["hold"]["api_requests_per_job"] = per_job(found, jobs)
        self.report["hold"]["reconciles_per_job"] = _per_job(woken, jobs)
        self.report["phases"]["hold"] = {"wall_s": round(end - start, 2), "finished": True}
        return bool(done and done[0])

    def _hold_report(self, start: float, end: float, hours: float, cpu: dict[str, float]) -> None:
        fleet, slots = self.fleet, self.args.max_concurrent_runs
        jobs = fleet.jobs_between(start, end)
        background = {
            k: v for k, v in jobs.items() if k in ("drift", "health", "membership", "refresh")
        }
        machine_hours = max(self.wanted, 1) * hours
        minute = 60.0 / self.args.time_scale  # a controller minute, in wall seconds
        gaps = [gap / minute for gap in fleet.read_gaps(start, end)]
        self.report["hold"] = {
            "controller_hours": round(hours, 3),
            # What a budget a minute bounds, and whether every machine was read.
            "background_starts_max_in_a_minute": fleet.most_background_in(start, end, minute),
            "machine_read_gap_minutes": {
                "p50": percentile(gaps, 50),
                "max": percentile(gaps, 100),
                "machines": len(gaps),
            },
            "background_jobs_per_hour": {k: round(v / hours, 1) for k, v in background.items()},
            "background_jobs_per_hour_total": round(sum(background.values()) / hours, 1),
            "jobs_by_kind": jobs,
            "pods_per_hour": round(fleet.pods_between(start, end) / hours, 1),
            "slot_occupancy": fleet.occupancy_between(start, end, slots),
            "cpu_s": cpu,
            "cpu_s_per_machine_hour": {
                name: round(cpu.get(name, 0.0) / machine_hours, 4)
                for name in ("controller", "capi", "apiserver")
            },
        }

    async def _sleep_reporting(self, name: str, seconds: float) -> None:
        end = time.monotonic() + max(seconds, 0.0)
        while (left := end - time.monotonic()) > 0:
            await anyio.sleep(min(left, 15.0))
            say(f"{name}: {self._progress()} (load {_load()[0]})")

    def _compare(self) -> None:
        phases = self.report["phases"]
        quiet = (phases.get("scale_up_quiet") or {}).get("wait_for_apply_job_s") or {}
        held = (phases.get("scale_up_held") or {}).get("wait_for_apply_job_s") or {}
        self.report["change_wait_s"] = {
            "schedules_on": held,
            "schedules_off": quiet,
            "p99_ratio": _ratio(held.get("p99"), quiet.get("p99")),
        }
        cpu = (self.report.get("hold") or {}).get("cpu_s_per_machine_hour") or {}
        self.report["ratio_controller_to_capi"] = _ratio(cpu.get("controller"), cpu.get("capi"))
        self.report["ratio_controller_to_apiserver"] = _ratio(
            cpu.get("controller"), cpu.get("apiserver")
        )

    async def _until(self, name: str, done: Any, limit: float) -> bool:
        started, last = time.monotonic(), 0.0
        while not await done():
            if time.monotonic() - started > limit:
                break
            if time.monotonic() - last > 15:
                last = time.monotonic()
                say(f"{name}: {self._progress()} (load {_load()[0]})")
            await anyio.sleep(0.5)
        wall = round(time.monotonic() - started, 2)
        finished = bool(await done())
        self.report["phases"][name] = {"wall_s": wall, "finished": finished}
        say(f"{name}: {'done' if finished else 'NOT finished'} in {wall}s ({self._progress()})")
        return finished

    def _progress(self) -> str:
        fleet = self.fleet
        return (
            f"{len(fleet.phases)} Machines, {fleet.running()} Running of {self.wanted},"
            f" {fleet.jobs_running()} Jobs running, {len(fleet.job_seen)} seen"
        )

    async def _all_running(self) -> bool:
        if self.fleet.running() < self.wanted:
            return False
        for index in range(self.args.clusters):
            if await self._phase_of("clusters", cluster_name(index)) != "Provisioned":
                return False
            if await self._phase_of("machinepools", pool_name(index)) != "Running":
                return False
        return True

    async def _phase_of(self, plural: str, name: str) -> str:
        path = f"/apis/{CAPI_GROUP}/{CAPI_VERSION}/namespaces/{NAMESPACE}/{plural}/{name}"
        found = await self.transport.request("GET", path)
        return str((found.get("status") or {}).get("phase") or "")

    async def _controller_pods(self) -> list[Json]:
        path = resource_path(PODS, CONTROLLER_NAMESPACE)
        found = await self.transport.request("GET", path, params={"labelSelector": CONTROLLER_PODS})
        return list(found["items"])

    async def _controller_pids(self) -> tuple[int, ...]:
        return tuple(p for p in map(pod_pid, await self._controller_pods()) if p is not None)

    async def _stretch(self) -> dict[str, float]:
        """Each identity's stretch of its schedules, as the controller's gauge says."""
        pods = await self._controller_pods()
        return await anyio.to_thread.run_sync(labelled, pods, STRETCH_FAMILY, "identity")

    async def _reconciles(self) -> dict[str, float]:
        """The leader's reconciles so far by what woke them. A leader that changes in
        the hold restarts its counts: the bench reports `controller_restarts`."""
        pods = await self._controller_pods()
        family, sample = RECONCILES_FAMILY, f"{RECONCILES_FAMILY}_total"
        return await anyio.to_thread.run_sync(labelled, pods, family, "trigger", sample)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _less(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def _per_job(counts: dict[str, float], jobs: int) -> dict[str, float]:
    """Reconciles a Job, in all and by what woke them."""
    per = {k: round(v / max(jobs, 1), 2) for k, v in sorted(counts.items())}
    return {"total": round(sum(counts.values()) / max(jobs, 1), 2), **per}


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 3) if ours is not None and theirs else None
