"""`captf bench capi --machines N` (`make bench-capi MACHINES=N`): our controller against
Cluster API's own manager and kube-apiserver, in one run, on the `make run` machinery.

The local cluster as `make run` starts it (kube-apiserver, etcd and
kube-controller-manager; Cluster API v1.14.2's manager; the controller as its Deployment
of two leader-elected replicas with its webhooks; the process node running every pod;
the example modules as images in a loopback registry; a stand-in kubelet registering a
Node per providerID), with `examples/clusterapi`'s Cluster, MachinePool and
MachineDeployment (the flaky cluster left out), the MachineDeployment at 0. The machine
module's apply is one `terraform_data`: nothing slow. Then, timed:

- scale_up: the MachineDeployment to N, until every Machine is Running;
- scale_down: to 0, until every Machine and TerraformMachine is gone (destroyed);
- bare_tofu: N runs of the same module by OpenTofu alone, as many at once as the
  controller's run slots (controller/bench/bare.py).

The last line on stdout is one JSON object (docs/performance.md says what each field
is); progress goes to stderr. CPU seconds are read from /proc (controller/bench/
capi_procs.py): our controller's replicas with the children they waited for, Cluster
API's manager, kube-apiserver and etcd; the runner pods' (and their OpenTofu's) as this
process's ended children. Exit 0 when every phase finished, 1 otherwise."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import yaml

from controller.bench import bare
from controller.bench.capi_bottleneck import bottleneck, where_said
from controller.bench.capi_procs import Meter, ended_children_cpu, memory_mib, pod_pid
from controller.bench.capi_reconciles import breakdown, queue_means, scrape_counts
from controller.bench.capi_report import summarise
from controller.bench.capi_watch import Seen
from controller.core.basics.names import (
    CAPI_GROUP,
    CAPI_MACHINE,
    CAPI_VERSION,
    MACHINE,
    TIME_ORIGIN,
)
from controller.dev import controlplane, module_images, workload
from controller.dev.clusterapi import ClusterApi, ClusterApiMissing, capi_dir
from controller.dev.demo import CREDENTIALS, EXAMPLE_RESOURCES, EXAMPLES, MANIFESTS
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
from controller.dev.replicas import CONTROLLER_PODS, scrape_sum
from controller.image.build import BuildError
from controller.io.api import CAPI_OBJECTS, JOBS, OBJECTS, PODS, resource_path
from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from runtime.cache import Informer, Resource
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry, RegistryMissing, registry_dir
from runtime.jsonobj import Json
from runtime.timeorigin import scaled_clock
from runtime.transport import Transport, open_transport

CLUSTER, DEPLOYMENT_NAME, POOL_NAME, NAMESPACE = "demo", "demo-md-0", "demo-mp-0", "default"
MERGE = "application/merge-patch+json"
DEPLOYMENTS = Resource(CAPI_GROUP, CAPI_VERSION, "machinedeployments")
SETTLE_SECONDS = 10.0
LOGS = Path(".local/bench-capi")
Done = Callable[[], Awaitable[bool]]


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        say("building or finding OpenTofu, Cluster API's manager, the registry ...")
        tofu, capi, registry_bin = tofu_dir(build=True), capi_dir(build=True), registry_dir()
    except (TofuMissing, ClusterApiMissing, RegistryMissing) as err:
        print(f"captf bench capi: {err}", file=sys.stderr)
        return 2
    with (
        ApiServer(controller_manager=True) as server,
        Registry(server.workdir, bin_dir=registry_bin) as registry,
    ):
        server.install_crds(MANIFESTS / "crds")
        server.install_crds(controlplane.CRDS)
        roles = module_images.role_dirs(workload.MODULES)
        flaky = (workload.MODULES / "cluster", EXAMPLES / "flaky")
        try:
            images = module_images.push_all(roles, flaky, registry.host, tofu, say=say)
        except BuildError as err:
            print(f"captf bench capi: {err}", file=sys.stderr)
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
        kubeconfig = str(server.kubeconfig)
        async with open_transport(kubeconfig) as transport, anyio.create_task_group() as tg:
            await scaled_clock(transport, CONTROLLER_NAMESPACE, TIME_ORIGIN, args.time_scale)
            env = runner_environ(tofu) | {"CAPTF_CRANE": str(crane)}
            # CAPTF_BENCH_SOURCE: the pods run the captf of another source tree (an older
            # commit's: what a change is measured against), as `bench scale` allows.
            source = os.environ.get("CAPTF_BENCH_SOURCE")
            env |= {"PYTHONPATH": source} if source else {}
            # Kept after the run (the server's directory is not): where the time went.
            logs = LOGS / "pod-logs"
            shutil.rmtree(LOGS, ignore_errors=True)
            async with ProcessNode(
                transport, images=default_images(env), log_dir=logs, crane=crane
            ):
                seen = Seen(DEPLOYMENT_NAME)
                for informer in _watches(transport, seen):
                    tg.start_soon(informer.run)
                tg.start_soon(workload.NodeJoiner(transport, say=lambda *_: None).run)
                # The demo Cluster's control plane, reported as `make run` reports it.
                tg.start_soon(controlplane.ControlPlaneReporter(transport, say=lambda *_: None).run)
                tg.start_soon(_register_webhooks, transport, held)
                say(f"pod logs under {logs}")
                pids = {"capi": (manager.pid,), **_server_pids(server)}
                report = await Phases(args, transport, seen, pids, tofu).run()
            tg.cancel_scope.cancel()
    return report


def _install(args: argparse.Namespace, server: ApiServer, images: dict[str, str]) -> list[Json]:
    """The controller (its webhook configurations held back until a replica serves them,
    as `make run` does), then the cluster's objects; returns the held configurations."""
    webhook = LoopbackWebhook.make(free_port())
    fitted = on_process_node(
        render(MANIFESTS), metrics_port=free_port(), time_scale=args.time_scale, webhook=webhook
    )
    for obj in fitted:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == DEPLOYMENT:
            [container] = obj["spec"]["template"]["spec"]["containers"]
            container["args"].append(f"--max-concurrent-runs={args.max_concurrent_runs}")
    held = [o for o in fitted if o["kind"] in WEBHOOK_CONFIGURATIONS]
    apply(server, [o for o in fitted if o["kind"] not in WEBHOOK_CONFIGURATIONS])
    for obj in _objects(server.kubeconfig.read_bytes(), images):
        server.request("POST", resource_path(EXAMPLE_RESOURCES[obj["kind"]], NAMESPACE), obj)
    say("controller and the demo cluster applied (MachineDeployment at 0)")
    return held


def _objects(kubeconfig: bytes, images: dict[str, str]) -> list[Json]:
    """`make run`'s objects without the flaky cluster, the MachineDeployment at 0."""
    docs = [*_documents(CREDENTIALS), workload.kubeconfig_secret(CLUSTER, kubeconfig)]
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if "flaky" not in path.name:
            docs += [module_images.point_at(doc, images) for doc in _documents(path)]
    for doc in docs:
        if doc["kind"] == "MachineDeployment":
            doc["spec"]["replicas"] = 0
    return docs


def _documents(path: Path) -> list[Json]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _watches(transport: Transport, seen: Seen) -> list[Informer]:
    clock = LoopClock()
    found = []
    for resource, handler in (
        (CAPI_OBJECTS[CAPI_MACHINE], seen.machine),
        (OBJECTS[MACHINE], seen.terraform_machine),
        (JOBS, seen.job),
    ):
        informer = Informer(transport, resource, clock=clock)
        informer.add_handler(handler)
        found.append(informer)
    return found


def _server_pids(server: ApiServer) -> dict[str, tuple[int, ...]]:
    pids = server.pids
    return {"apiserver": (pids["kube-apiserver"],), "etcd": (pids["etcd"],)}


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
        seen: Seen,
        pids: dict[str, tuple[int, ...]],
        tofu: Path,
    ) -> None:
        self.n, self.slots = args.machines, args.max_concurrent_runs
        self.transport, self.seen, self.pids, self.tofu = transport, seen, pids, tofu
        self.limit = 300.0 + 4.0 * self.n
        self.report: dict[str, Any] = {
            "machines": self.n,
            "max_concurrent_runs": self.slots,
            "time_scale": args.time_scale,
            "phases": {},
            "cpu_s": {},
        }

    async def run(self) -> dict[str, Any]:
        ready = await self._until("ready", self._ready, 600.0)
        controller = await self._controller_pids()
        meter = Meter({"controller": controller, **self.pids}, children=frozenset({"controller"}))
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sample, meter)
            reconciles = [await self._reconciles()]
            by_labels = [await self._reconciles_by_labels()]
            up = ready and await self._phase("scale_up", self.n, meter, self._all_running)
            reconciles.append(await self._reconciles())
            down = up and await self._phase("scale_down", 0, meter, self._all_gone)
            reconciles.append(await self._reconciles())
            by_labels.append(await self._reconciles_by_labels())
            await anyio.sleep(SETTLE_SECONDS)
            tg.cancel_scope.cancel()
        settled = [memory_mib(pid, "VmRSS") for pid in await self._controller_pids()]
        self.report["rss_mib"] = {
            "peak": round(meter.peak_mib("controller"), 1),
            "settled": round(max(settled, default=0.0), 1),
        }
        # A replica that restarted (a lost lease under load) is a new process: its CPU is
        # counted up to its last sample, its reconcile counter starts again.
        self.report["controller_restarts"] = meter.processes("controller") - len(controller)
        bare_ok = down and await self._bare()
        self.report["finished"] = bool(ready and up and down and bare_ok)
        self._summarise(reconciles[-1] - reconciles[0])
        self.report["reconciles_per_machine_by"] = breakdown(by_labels[0], by_labels[-1], self.n)
        self.report["queue"] = queue_means(by_labels[0], by_labels[-1])
        return self.report

    async def _sample(self, meter: Meter) -> None:
        """Every second: the controller's processes (a restarted replica is a new one) and
        every process's CPU and memory so far."""
        while True:
            for pid in await self._controller_pids():
                meter.add("controller", pid)
            meter.sample()
            await anyio.sleep(1.0)

    async def _controller_pids(self) -> tuple[int, ...]:
        return tuple(p for p in map(pod_pid, await self._controller_pods()) if p is not None)

    async def _phase(self, name: str, replicas: int, meter: Meter, done: Done) -> bool:
        meter.lap()
        path = resource_path(DEPLOYMENTS, NAMESPACE, DEPLOYMENT_NAME)
        body = {"spec": {"replicas": replicas}}
        await self.transport.request("PATCH", path, body=body, content_type=MERGE)
        finished = await self._until(name, done, self.limit)
        self.report["cpu_s"][name] = meter.lap()
        return finished

    async def _until(self, name: str, done: Done, limit: float) -> bool:
        started = time.monotonic()
        last = 0.0
        while not await done():
            if time.monotonic() - started > limit:
                break
            if time.monotonic() - last > 10:
                last = time.monotonic()
                say(f"{name}: {self._progress()}")
            await anyio.sleep(0.2)
        wall = round(time.monotonic() - started, 2)
        finished = bool(await done())
        self.report["phases"][name] = {"wall_s": wall, "finished": finished}
        say(f"{name}: {'done' if finished else 'NOT finished'} in {wall}s ({self._progress()})")
        return finished

    def _progress(self) -> str:
        seen = self.seen
        running = sum(1 for j in seen.job_seen if j not in seen.job_done)
        return (
            f"{len(seen.phases)} Machines, {seen.running()} Running, "
            f"{len(seen.infra)} TerraformMachines, {running} Jobs running"
        )

    async def _ready(self) -> bool:
        cluster = await self._phase_of("clusters", CLUSTER)
        pool = await self._phase_of("machinepools", POOL_NAME)
        return cluster == "Provisioned" and pool == "Running"

    async def _phase_of(self, plural: str, name: str) -> str:
        path = f"/apis/{CAPI_GROUP}/{CAPI_VERSION}/namespaces/{NAMESPACE}/{plural}/{name}"
        found = await self.transport.request("GET", path)
        return str((found.get("status") or {}).get("phase") or "")

    async def _all_running(self) -> bool:
        return bool(len(self.seen.phases) == self.n and self.seen.running() == self.n)

    async def _all_gone(self) -> bool:
        return not self.seen.phases and not self.seen.infra

    async def _controller_pods(self) -> list[Json]:
        path = resource_path(PODS, CONTROLLER_NAMESPACE)
        found = await self.transport.request("GET", path, params={"labelSelector": CONTROLLER_PODS})
        return list(found["items"])

    async def _reconciles(self) -> float:
        family = "controller_runtime_reconcile"  # the parser drops `_total`
        pods = await self._controller_pods()
        return float(await anyio.to_thread.run_sync(scrape_sum, pods, family))

    async def _reconciles_by_labels(self) -> dict[tuple[str, str], float]:
        pods = await self._controller_pods()
        return await anyio.to_thread.run_sync(scrape_counts, pods)

    async def _bare(self) -> bool:
        before, started = ended_children_cpu(), time.monotonic()
        module = workload.MODULES / "machine"
        try:
            await bare.run_all(module, self.tofu, self.n, self.slots)
            finished = True
        except bare.BareFailed as failed:
            say(f"bare_tofu: {failed}")
            finished = False
        wall = round(time.monotonic() - started, 2)
        self.report["phases"]["bare_tofu"] = {"wall_s": wall, "finished": finished}
        self.report["cpu_s"]["bare_tofu"] = {"tofu": round(ended_children_cpu() - before, 2)}
        say(f"bare_tofu: {self.n} runs in {wall}s")
        return finished

    def _summarise(self, reconciles: float) -> None:
        summarise(self.report, self.seen, reconciles, self.slots)
        self.report["bottleneck"] = where = bottleneck(self.report, self._apply_logs())
        say(f"bottleneck: {where_said(where)}")

    def _apply_logs(self) -> list[Path]:
        """The pod logs of the Machines' apply Jobs (a pod is named after its Job)."""
        seen = self.seen
        jobs = [
            job
            for (infra, op), names in seen.jobs.items()
            if op == "apply" and seen.owners.get(infra) in seen.machines
            for job in names
        ]
        return [log for job in jobs for log in (LOGS / "pod-logs").glob(f"*/{job}-*.log")]
