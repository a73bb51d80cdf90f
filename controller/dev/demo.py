"""`captf dev run` (`make run`): the whole system on this machine, with a live timeline.

A real kube-apiserver, etcd and kube-controller-manager; Cluster API's core manager
beside them, with its CRDs and webhooks (controller.dev.clusterapi); the controller
installed from manifests/ as users install it (the kustomization rendered here, then
applied): its Deployment of two leader-elected replicas under the ServiceAccount
`captf-controller`; a process node running every pod (the controller's, and each
runner's with the real OpenTofu) as a local process; an OCI registry on loopback
(runtime.envtest.registry), storing under the API server's working directory, for
images to push with crane. Then a Cluster API cluster, `demo`:
the role modules as ConfigMaps (examples/modules, or the directory --modules names, one
subdirectory per role), examples/clusterapi (a Cluster on a TerraformCluster,
a MachineDeployment of three, a MachinePool of two, and the `flaky` cluster whose module
fails twice), and `demo-kubeconfig` naming this API server as the
workload cluster, where a stand-in registers a Node for each machine's providerID
(controller.dev.workload). Time is compressed (--time-scale): the 1-minute first retry
takes 60/K seconds.

examples/objects is not applied: its module predates the module contract (it declares
none of the contract's inputs), so under Cluster API every plan of it fails."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import yaml

from controller.core.basics.names import CAPI_GROUP, CAPI_VERSION, GROUP, VERSION
from controller.dev import workload
from controller.dev.clusterapi import ClusterApi, ClusterApiMissing, capi_dir
from controller.dev.install import DEPLOYMENT, apply, free_port, on_process_node
from controller.dev.install import NAMESPACE as CONTROLLER_NAMESPACE
from controller.dev.kustomize import render
from controller.dev.node import ProcessNode, default_images
from controller.dev.replicas import CONTROLLER_PODS, scrape_sum
from controller.dev.timeline import Timeline
from controller.io.api import (
    CAPI_OBJECTS,
    CONFIGMAPS,
    OBJECTS,
    PODS,
    SECRETS,
    resource_path,
)
from controller.io.main import TIME_ORIGIN
from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from runtime.cache.resource import Resource
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry, RegistryMissing, registry_dir
from runtime.timeorigin import scaled_clock
from runtime.transport import Transport, open_transport

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
EXAMPLES = REPO / "examples" / "clusterapi"
CREDENTIALS = REPO / "examples" / "objects" / "00-credentials.yaml"
CLUSTER = "demo"
CRDS = MANIFESTS / "crds"
KUBECONFIG = Path(".local/kubeconfig")
NAMESPACE = "default"
# What the examples hold, by kind.
_EXAMPLE_RESOURCES = {
    **OBJECTS,
    **CAPI_OBJECTS,
    "TerraformMachineTemplate": Resource(GROUP, VERSION, "terraformmachinetemplates"),
    "MachineDeployment": Resource(CAPI_GROUP, CAPI_VERSION, "machinedeployments"),
    "Secret": SECRETS,
    "ConfigMap": CONFIGMAPS,
}
Json = dict[str, Any]


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    modules_dir = Path(args.modules) if args.modules else workload.MODULES
    try:
        modules = workload.module_configmaps(modules_dir)
    except workload.ModuleDirInvalid as err:
        print(f"captf dev run: --modules: {err}", file=sys.stderr)
        return 2
    try:
        print("building or finding OpenTofu and the local provider ...", flush=True)
        tofu = tofu_dir(build=True)
        print("building or finding Cluster API's manager and clusterctl ...", flush=True)
        capi = capi_dir(build=True)
        print("building or finding the OCI registry and crane ...", flush=True)
        registry_bin = registry_dir(build=True)
    except (TofuMissing, ClusterApiMissing, RegistryMissing) as err:
        print(f"captf dev run: {err}", file=sys.stderr)
        return 2
    Path("/tmp/captf-demo-flaky-counter").unlink(missing_ok=True)
    with (
        ApiServer(kubeconfig=KUBECONFIG, controller_manager=True) as server,
        Registry(server.workdir, bin_dir=registry_bin) as registry,
    ):
        server.install_crds(CRDS)
        took = f"{server.startup_seconds:.1f}s"
        kcm = f"{server.controller_manager_seconds:.1f}s"
        print(f"API server ready at {server.url} ({took}); kubeconfig {KUBECONFIG}")
        print(f"kube-controller-manager ready ({kcm}): Job status comes from its Job controller")
        print(f"OCI registry at {registry.host} (push with {registry.crane}); log {registry.log}")
        # On this thread: the manager is spawned by the thread that enters ClusterApi.
        modules_of = Modules(modules_dir, modules)
        anyio.run(_run_all, args, tofu, capi, server, modules_of, registry.crane)
    return 0


@dataclass(frozen=True)
class Modules:
    """The role modules' ConfigMaps, read from `directory` before anything started."""

    directory: Path
    configmaps: list[Json]

    def shown(self) -> str:
        """The directory as a reader knows it: relative to the repository when inside."""
        resolved = self.directory.resolve()
        return str(resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else resolved)


async def _run_all(
    args: argparse.Namespace,
    tofu: Path,
    capi: Path,
    server: ApiServer,
    modules: Modules,
    crane: Path,
) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with ClusterApi(server, bin_dir=capi) as manager:
            print(
                f"Cluster API {capi.name.removeprefix('capi-')} manager ready"
                f" ({manager.startup_seconds:.1f}s), CRDs and webhooks installed; log {manager.log}"
            )
            await anyio.to_thread.run_sync(_install, args, server, modules)
            clusterctl = capi / "clusterctl"
            print(f"  {clusterctl} describe cluster {CLUSTER} --kubeconfig {KUBECONFIG}")
            print(f"  captf get --kubeconfig {KUBECONFIG} --time-scale {args.time_scale:g}")
            print("Ctrl-C stops everything.\n", flush=True)
            errors = await _watch(args, tofu, signals, crane)
    print(f"controller_runtime_reconcile_errors_total {errors:g} (every replica, while it ran)")


def _install(args: argparse.Namespace, server: ApiServer, modules: Modules) -> None:
    """The controller, then the cluster's objects; Cluster API's CRDs are there already, so
    the controller's informers of Clusters, Machines and MachinePools list at once."""
    port = free_port()
    apply(
        server,
        on_process_node(render(MANIFESTS), metrics_port=port, time_scale=args.time_scale),
    )
    print(
        f"applied manifests/ (kustomization): Deployment {CONTROLLER_NAMESPACE}/{DEPLOYMENT},"
        f" 2 replicas; each serves /metrics on port {port} of its pod IP"
    )
    for obj in _objects(server.kubeconfig.read_bytes(), modules.configmaps):
        server.request("POST", _collection(obj), obj)
    minute = 60 / args.time_scale
    print(
        f"applied the modules of {modules.shown()} (ConfigMaps captf-module-*),"
        f" examples/clusterapi and"
        f" {CLUSTER}-kubeconfig (this API server is the workload cluster);"
        f" time scale {args.time_scale:g} (1m lasts {minute:.1f}s)"
    )
    print(
        "a Node with its providerID is registered for each machine the modules create"
        " (a stand-in for its kubelet joining), so Machines reach Running. Try:"
    )


async def _watch(args: argparse.Namespace, tofu: Path, signals: Any, crane: Path) -> float:
    async with open_transport(str(KUBECONFIG)) as transport, anyio.create_task_group() as tg:
        # Recorded before any replica starts (their ServiceAccount may read it, not
        # create it): every replica and this timeline then share one scaled timeline.
        clock = await scaled_clock(transport, CONTROLLER_NAMESPACE, TIME_ORIGIN, args.time_scale)
        images = default_images(runner_environ(tofu))
        async with ProcessNode(transport, images=images, log_dir=".local/pod-logs", crane=crane):
            timeline = Timeline(
                transport,
                clock=clock,
                scale=args.time_scale,
                deployment=(CONTROLLER_NAMESPACE, DEPLOYMENT),
                capi=True,
            )
            tg.start_soon(timeline.run)
            tg.start_soon(workload.NodeJoiner(transport, say=timeline.say).run)
            async for _ in signals:
                break
            errors = await _reconcile_errors(transport)
            print("\nstopping: controller pods, node, Cluster API, control plane ...", flush=True)
        tg.cancel_scope.cancel()
    return errors


async def _reconcile_errors(transport: Transport) -> float:
    path = resource_path(PODS, CONTROLLER_NAMESPACE)
    pods = await transport.request("GET", path, params={"labelSelector": CONTROLLER_PODS})
    family = "controller_runtime_reconcile_errors"  # the parser drops `_total`
    return await anyio.to_thread.run_sync(scrape_sum, pods["items"], family)


def _objects(kubeconfig: bytes, modules: list[Json]) -> list[Json]:
    """Everything `make run` applies after the controller, in order: the credentials
    (the runner's RBAC is the controller's to provide), the `modules` ConfigMaps, the
    workload kubeconfig, then examples/clusterapi. The flaky cluster's module is always
    the example cluster module with its failing resource added, whatever `modules` are:
    that overlay is written against the example, and another module's names could clash
    with it."""
    flaky = workload.module_configmap("cluster", "captf-module-flaky")
    flaky["data"] |= {p.name: p.read_text() for p in sorted((EXAMPLES / "flaky").glob("*.tf"))}
    docs = [*_documents(CREDENTIALS), *modules, flaky]
    docs.append(workload.kubeconfig_secret(CLUSTER, kubeconfig))
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += _documents(path)
    return docs


def _documents(path: Path) -> list[Json]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _collection(obj: Json) -> str:
    return resource_path(_EXAMPLE_RESOURCES[obj["kind"]], NAMESPACE)
