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
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson

from controller.bench.fleet_objects import (
    NAMESPACE,
    cluster,
    per_cluster,
    shared,
)
from controller.bench.fleet_phases import Phases, say
from controller.bench.fleet_watch import Fleet
from controller.core.basics.names import (
    CAPI_GROUP,
    CAPI_MACHINE,
    CAPI_VERSION,
    GROUP,
    IDENTITY,
    MACHINE,
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
