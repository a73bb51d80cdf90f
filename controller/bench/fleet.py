"""`captf bench fleet` (`make bench-fleet`): a fleet that lives for hours, its background
Jobs against the changes users make, measured under Cluster API's own manager.

On `make run`'s machinery (controller/bench/capi.py says what: the local cluster,
Cluster API v1.14.2's manager, the controller's Deployment with its webhooks, the
process node, module images in a loopback registry, stand-in kubelets, each Cluster's
LocalControlPlane), C clusters of controller/bench/fleet_objects.py, N Machines in their
MachineDeployments (N / C each) and a MachinePool of two each, all through one
TerraformClusterIdentity. Every Job of a Machine reads its instance for `--job-seconds`
(and a create takes as long again), so run slots are busy as with a real cloud. Timed:

- ready: every Cluster Provisioned, every pool Running, the N Machines Running;
- scale_up_quiet: every MachineDeployment up by U, the schedules off everywhere, until
  the new Machines are Running: each one's wait for its apply Job, in quiet slots;
- hold: the schedules of every object turned on (their defaults: health 5m, drift 30m,
  membership 1m), then H hours of controller time (H x 3600 / K seconds at time scale
  K); halfway through, every MachineDeployment up by U again (scale_up_held): each new
  Machine's wait for its apply Job behind the fleet's background.

The last line on stdout is one JSON object (docs/performance.md says each field);
progress goes to stderr, pod logs stay under .local/bench-fleet/pod-logs. Exit 0 when
every phase finished, 1 otherwise."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import orjson

from controller.bench.capi_procs import Meter, memory_mib, pod_pid
from controller.bench.capi_watch import percentile
from controller.bench.fleet_audit import per_job, requests_between
from controller.bench.fleet_metrics import labelled
from controller.bench.fleet_objects import (
    CLUSTER_SCHEDULES_ON,
    NAMESPACE,
    POOL_SCHEDULES_ON,
    SCHEDULES_ON,
    cluster,
    cluster_name,
    deployment_name,
    pool_name,
    shared,
)
from controller.bench.fleet_watch import Fleet
from controller.core.basics.names import (
    CAPI_GROUP,
    CAPI_MACHINE,
    CAPI_VERSION,
    CLUSTER,
    GROUP,
    IDENTITY,
    MACHINE,
    POOL,
    TIME_ORIGIN,
    VERSION,
)
from controller.dev import controlplane, module_images, workload
from controller.dev.clusterapi import ClusterApi, ClusterApiMissing, capi_dir
from controller.dev.demo import EXAMPLES, MANIFESTS
from controller.dev.install import (
    DEPLOYMENT,
    WEBHOOK_CONFIGURATIONS,
    LoopbackWebhook,
    apply,
    free_port,
    on_process_node,
    path_of,
)
from controller.dev.install import NAMESPACE as CONTROLLER_NAMESPACE
from controller.dev.kustomize import render
from controller.dev.node import ProcessNode, default_images
from controller.dev.replicas import CONTROLLER_PODS
from controller.image.build import BuildError
from controller.io.api import CAPI_OBJECTS, JOBS, LEASES, OBJECTS, PODS, SECRETS, resource_path
from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from runtime.cache import Informer, Resource, Selection
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry, RegistryMissing, registry_dir
from runtime.jsonobj import Json
from runtime.timeorigin import scaled_clock
from runtime.transport import Transport, open_transport

MODULE = Path(__file__).resolve().parent / "fleet_module"
MERGE = "application/merge-patch+json"
DEPLOYMENTS = Resource(CAPI_GROUP, CAPI_VERSION, "machinedeployments")
_RESOURCES = {
    **OBJECTS,
    **CAPI_OBJECTS,
    "TerraformMachineTemplate": Resource(GROUP, VERSION, "terraformmachinetemplates"),
    "MachineDeployment": DEPLOYMENTS,
    "Secret": SECRETS,
    controlplane.KIND: controlplane.CONTROL_PLANES,
}
LOGS = Path(".local/bench-fleet")
# The controller's gauge of each identity's stretch (absent before issue 39).
STRETCH_FAMILY = "captf_background_stretch"


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        say("building or finding OpenTofu, Cluster API's manager, the registry ...")
        tofu, capi, registry_bin = tofu_dir(build=True), capi_dir(build=True), registry_dir()
    except (TofuMissing, ClusterApiMissing, RegistryMissing) as err:
        print(f"captf bench fleet: {err}", file=sys.stderr)
        return 2
    with (
        ApiServer(controller_manager=True) as server,
        Registry(server.workdir, bin_dir=registry_bin) as registry,
    ):
        server.install_crds(MANIFESTS / "crds")
        server.install_crds(controlplane.CRDS)
        roles = module_images.role_dirs(workload.MODULES) | {"machine": MODULE}
        flaky = (workload.MODULES / "cluster", EXAMPLES / "flaky")
        try:
            images = module_images.push_all(roles, flaky, registry.host, tofu, say=say)
        except BuildError as err:
            print(f"captf bench fleet: {err}", file=sys.stderr)
            return 2
        report = anyio.run(_bench, args, tofu, capi, server, images, registry.crane)
    print(orjson.dumps(report).decode(), flush=True)
    return 0 if report["finished"] else 1


async def _bench(
    args: argparse.Namespace,
    tofu: Path,
    capi: Path,
    server: ApiServer,
    images: dict[str, str],
    crane: Path,
) -> dict[str, Any]:
    async with ClusterApi(server, bin_dir=capi) as manager:
        say(f"Cluster API manager ready; log {manager.log}")
        held = await anyio.to_thread.run_sync(_install, args, server, images)
        async with (
            open_transport(str(server.kubeconfig)) as transport,
            anyio.create_task_group() as tg,
        ):
            await scaled_clock(transport, CONTROLLER_NAMESPACE, TIME_ORIGIN, args.time_scale)
            env = runner_environ(tofu) | {"CAPTF_CRANE": str(crane)}
            source = os.environ.get("CAPTF_BENCH_SOURCE")  # as `bench capi` allows
            env |= {"PYTHONPATH": source} if source else {}
            logs = LOGS / "pod-logs"
            shutil.rmtree(LOGS, ignore_errors=True)
            async with ProcessNode(
                transport, images=default_images(env), log_dir=logs, crane=crane
            ):
                fleet = Fleet()
                for informer in _watches(transport, fleet):
                    tg.start_soon(informer.run)
                quiet = lambda *_: None  # noqa: E731
                tg.start_soon(workload.NodeJoiner(transport, say=quiet).run)
                tg.start_soon(controlplane.ControlPlaneReporter(transport, say=quiet).run)
                tg.start_soon(_register_webhooks, transport, held)
                say(f"pod logs under {logs}")
                pids: dict[str, tuple[int, ...]] = {
                    "capi": (manager.pid,),
                    "apiserver": (server.pids["kube-apiserver"],),
                    "etcd": (server.pids["etcd"],),
                }
                phases = Phases(args, transport, fleet, pids, audit=server.audit_log)
                report = await phases.run()
            tg.cancel_scope.cancel()
    return report


def _install(args: argparse.Namespace, server: ApiServer, images: dict[str, str]) -> list[Json]:
    """The controller (its webhook configurations held back until a replica serves them,
    as `make run` does), then the fleet; returns the held configurations."""
    webhook = LoopbackWebhook.make(free_port())
    fitted = on_process_node(
        render(MANIFESTS), metrics_port=free_port(), time_scale=args.time_scale, webhook=webhook
    )
    for obj in fitted:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == DEPLOYMENT:
            [container] = obj["spec"]["template"]["spec"]["containers"]
            container["args"].append(f"--max-concurrent-runs={args.max_concurrent_runs}")
            container["args"].extend(args.controller_arg or [])
    held = [o for o in fitted if o["kind"] in WEBHOOK_CONFIGURATIONS]
    apply(server, [o for o in fitted if o["kind"] not in WEBHOOK_CONFIGURATIONS])
    docs = shared(server.kubeconfig.read_bytes(), args.clusters)
    for index in range(args.clusters):
        docs += cluster(index, images, per_cluster(args, index), args.job_seconds)
    for obj in docs:
        if obj["kind"] == IDENTITY:
            server.request("POST", f"/apis/{GROUP}/{VERSION}/terraformclusteridentities", obj)
        else:
            server.request("POST", resource_path(_RESOURCES[obj["kind"]], NAMESPACE), obj)
    say(f"controller and {args.clusters} clusters of {args.machines} Machines applied")
    return held


def per_cluster(args: argparse.Namespace, index: int) -> int:
    """Machines of cluster `index`: N spread over C, the first ones one more."""
    machines, clusters = int(args.machines), int(args.clusters)
    return machines // clusters + (1 if index < machines % clusters else 0)


def scale_up_of(args: argparse.Namespace) -> int:
    """Machines each scale-up adds to each cluster: `--scale-up`, else a third of the
    fleet spread over the clusters (at least one each)."""
    if args.scale_up:
        return int(args.scale_up)
    return max(1, math.ceil(int(args.machines) / 3 / int(args.clusters)))


def _watches(transport: Transport, fleet: Fleet) -> list[Informer]:
    clock = LoopClock()
    found = []
    for resource, handler, where in (
        (CAPI_OBJECTS[CAPI_MACHINE], fleet.machine, None),
        (OBJECTS[MACHINE], fleet.terraform_machine, None),
        (JOBS, fleet.job, None),
        (PODS, fleet.pod, NAMESPACE),
        (LEASES, fleet.lease, CONTROLLER_NAMESPACE),
    ):
        informer = Informer(transport, resource, clock=clock, selection=Selection(namespace=where))
        informer.add_handler(handler)
        found.append(informer)
    return found


async def _register_webhooks(transport: Transport, configurations: list[Json]) -> None:
    path = f"/apis/apps/v1/namespaces/{CONTROLLER_NAMESPACE}/deployments/{DEPLOYMENT}"
    while True:  # polled, as `make run` does
        status = (await transport.request("GET", path)).get("status") or {}
        if status.get("readyReplicas"):
            break
        await anyio.sleep(1)
    for obj in configurations:
        await transport.request("POST", path_of(obj), body=obj)


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
        done: list[bool] = []
        async with anyio.create_task_group() as tg:
            await self._sleep_reporting("hold", wall / 2)

            async def scale_up() -> None:
                done.append(await self._scale_up("scale_up_held"))

            tg.start_soon(scale_up)
            await self._sleep_reporting("hold", start + wall - time.monotonic())
        end, ended = time.monotonic(), datetime.now(UTC)
        cpu = meter.lap()
        hours = (end - start) * self.args.time_scale / 3600.0
        self._hold_report(start, end, hours, cpu)
        found = await anyio.to_thread.run_sync(requests_between, self.audit, began, ended)
        jobs = sum(self.report["hold"]["jobs_by_kind"].values())
        self.report["hold"]["api_requests_per_job"] = per_job(found, jobs)
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


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 3) if ours is not None and theirs else None
