"""`captf dev run` (`make run`): the whole system on this machine, with a live timeline.

A real kube-apiserver, etcd and kube-controller-manager; Cluster API's core manager
beside them, with its CRDs and webhooks (controller.dev.clusterapi); the controller
installed from manifests/ as users install it (the kustomization rendered here, then
applied): its Deployment of two leader-elected replicas under the ServiceAccount
`captf-controller`; a process node running every pod (the controller's, and each
runner's with the real OpenTofu) as a local process; an OCI registry on loopback
(runtime.envtest.registry), storing under the API server's working directory. Then a
Cluster API cluster, `demo`: the role modules (examples/modules, or the directory
--modules names, one subdirectory per role) built into module images and pushed to that
registry (controller.dev.module_images), examples/clusterapi pointed at them by tag
(spec.source.image; the process node pulls them as image volumes), a Cluster on a
TerraformCluster,
a MachineDeployment of three, a MachinePool of two, and the `flaky` cluster whose module
fails twice), and `<cluster>-kubeconfig` naming this API server as each cluster's
workload cluster, where a stand-in registers a Node for each machine's providerID
(controller.dev.workload). Each Cluster's control plane is that API server, reported on a
LocalControlPlane (controller.dev.controlplane). Time is compressed (--time-scale): the
1-minute first retry takes 60/K seconds.

examples/objects is not applied: its module predates the module contract (it declares
none of the contract's inputs), so under Cluster API every plan of it fails."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import yaml

from controller.core.basics.names import CAPI_GROUP, CAPI_VERSION, GROUP, TIME_ORIGIN, VERSION
from controller.dev import controlplane, module_images, workload
from controller.dev.clusterapi import ClusterApi, ClusterApiMissing, capi_dir
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
from controller.dev.timeline import Timeline
from controller.image.build import BuildError
from controller.io.api import (
    CAPI_OBJECTS,
    CONFIGMAPS,
    OBJECTS,
    PODS,
    SECRETS,
    resource_path,
)
from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from runtime.cache.resource import Resource
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry, RegistryMissing, registry_dir
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.supervise import supervised
from runtime.timeorigin import scaled_clock
from runtime.transport import Transport, open_transport

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
EXAMPLES = REPO / "examples" / "clusterapi"
CREDENTIALS = REPO / "examples" / "objects" / "00-credentials.yaml"
CLUSTER = "demo"
# Every Cluster of the examples: each gets `<name>-kubeconfig`, naming this API server.
CLUSTERS = (CLUSTER, "flaky")
CRDS = MANIFESTS / "crds"
KUBECONFIG = Path(".local/kubeconfig")
NAMESPACE = "default"
# What the examples hold, by kind (also what `captf bench capi` applies of them).
EXAMPLE_RESOURCES = {
    **OBJECTS,
    **CAPI_OBJECTS,
    "TerraformMachineTemplate": Resource(GROUP, VERSION, "terraformmachinetemplates"),
    "MachineDeployment": Resource(CAPI_GROUP, CAPI_VERSION, "machinedeployments"),
    "Secret": SECRETS,
    "ConfigMap": CONFIGMAPS,
    controlplane.KIND: controlplane.CONTROL_PLANES,
}


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    modules_dir = Path(args.modules) if args.modules else workload.MODULES
    try:
        roles = module_images.role_dirs(modules_dir)
    except module_images.ModulesInvalid as err:
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
        server.install_crds(controlplane.CRDS)
        took = f"{server.startup_seconds:.1f}s"
        kcm = f"{server.controller_manager_seconds:.1f}s"
        print(f"API server ready at {server.url} ({took}); kubeconfig {KUBECONFIG}")
        print(f"kube-controller-manager ready ({kcm}): Job status comes from its Job controller")
        print(f"OCI registry at {registry.host} (push with {registry.crane}); log {registry.log}")
        try:
            images = _push_images(roles, registry.host, tofu)
        except BuildError as err:
            print(f"captf dev run: {err}", file=sys.stderr)
            return 2
        # On this thread: the manager is spawned by the thread that enters ClusterApi.
        modules_of = Modules(modules_dir, images)
        anyio.run(_run_all, args, tofu, capi, server, modules_of, registry.crane)
    return 0


def _push_images(roles: dict[str, Path], host: str, tofu: Path) -> dict[str, str]:
    print("module images (the module, OpenTofu, the providers it requires), by content:")
    started = time.monotonic()
    flaky = (workload.MODULES / "cluster", EXAMPLES / "flaky")
    pushed = module_images.push_all(roles, flaky, host, tofu, say=print)
    print(f"  pushed in {time.monotonic() - started:.1f}s", flush=True)
    return pushed


@dataclass(frozen=True)
class Modules:
    """The role modules' images, pushed from `directory` before anything started: name
    (role, or `flaky`) -> reference."""

    directory: Path
    images: dict[str, str]

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
            webhooks = await anyio.to_thread.run_sync(_install, args, server, modules)
            clusterctl = capi / "clusterctl"
            print(f"  {clusterctl} describe cluster {CLUSTER} --kubeconfig {KUBECONFIG}")
            print(f"  captf get --kubeconfig {KUBECONFIG} --time-scale {args.time_scale:g}")
            print("Ctrl-C stops everything.\n", flush=True)
            errors = await _watch(args, tofu, signals, crane, webhooks)
    print(f"controller_runtime_reconcile_errors_total {errors:g} (every replica, while it ran)")


def _install(args: argparse.Namespace, server: ApiServer, modules: Modules) -> list[Json]:
    """The controller, then the cluster's objects; Cluster API's CRDs are there already, so
    the controller's informers of Clusters, Machines and MachinePools list at once. Returns
    the webhook configurations, held back until a replica serves them: with failurePolicy
    Fail they would refuse every create until then (the objects made here are checked by
    the controller at reconcile, as any object stored without the webhook)."""
    port = free_port()
    webhook = LoopbackWebhook.make(free_port())
    fitted = on_process_node(
        render(MANIFESTS), metrics_port=port, time_scale=args.time_scale, webhook=webhook
    )
    held = [o for o in fitted if o["kind"] in WEBHOOK_CONFIGURATIONS]
    apply(server, [o for o in fitted if o["kind"] not in WEBHOOK_CONFIGURATIONS])
    print(
        f"applied manifests/ (kustomization): Deployment {CONTROLLER_NAMESPACE}/{DEPLOYMENT},"
        f" 2 replicas; each serves /metrics on port {port} of its pod IP and the admission"
        f" webhooks on {webhook.url('')} (a self-signed certificate)"
    )
    for obj in _objects(server.kubeconfig.read_bytes(), modules.images):
        server.request("POST", _collection(obj), obj)
    minute = 60 / args.time_scale
    print(
        f"applied examples/clusterapi on the module images of {modules.shown()} and"
        f" {' and '.join(f'{c}-kubeconfig' for c in CLUSTERS)} (this API server is the"
        " workload cluster);"
        f" time scale {args.time_scale:g} (1m lasts {minute:.1f}s)"
    )
    print(
        "a Node with its providerID and the version its machine asks for is registered for"
        " each machine the modules create (a stand-in for its kubelet joining), so Machines"
        " reach Running; each Cluster's control plane is this API server"
        f" ({controlplane.KIND}, its status reported here). Try:"
    )
    return held


async def _watch(
    args: argparse.Namespace, tofu: Path, signals: Any, crane: Path, webhooks: list[Json]
) -> float:
    async with open_transport(str(KUBECONFIG)) as transport, anyio.create_task_group() as tg:
        # Recorded before any replica starts (their ServiceAccount may read it, not
        # create it): every replica and this timeline then share one scaled timeline.
        clock = await scaled_clock(transport, CONTROLLER_NAMESPACE, TIME_ORIGIN, args.time_scale)
        # The controller image's ENV: the Dockerfile puts crane on its PATH, and a
        # process here inherits none, so it is named (controller/io/registry.py).
        images = default_images(runner_environ(tofu) | {"CAPTF_CRANE": str(crane)})
        async with ProcessNode(transport, images=images, log_dir=".local/pod-logs", crane=crane):
            timeline = Timeline(
                transport,
                clock=clock,
                scale=args.time_scale,
                deployment=(CONTROLLER_NAMESPACE, DEPLOYMENT),
                capi=True,
            )
            # Supervised: an error of one is logged with its name and that one starts
            # again; none ends the run (only Ctrl-C does).
            joiner = workload.NodeJoiner(transport, say=timeline.say)
            reporter = controlplane.ControlPlaneReporter(transport, say=timeline.say)
            real = LoopClock()
            tg.start_soon(supervised, "timeline", timeline.run, real)
            tg.start_soon(supervised, "stand-in kubelets", joiner.run, real)
            tg.start_soon(supervised, "control plane", reporter.run, real)
            register = partial(_register_webhooks, transport, webhooks, timeline.say)
            tg.start_soon(supervised, "webhook registration", register, real)
            async for _ in signals:
                break
            errors = await _reconcile_errors(transport)
            print("\nstopping: controller pods, node, Cluster API, control plane ...", flush=True)
        tg.cancel_scope.cancel()
    return errors


async def _register_webhooks(
    transport: Transport, configurations: list[Json], say: Callable[[str, str], None]
) -> None:
    """The webhook configurations, once a controller replica is Ready (it serves the
    webhooks before it is Ready)."""
    path = f"/apis/apps/v1/namespaces/{CONTROLLER_NAMESPACE}/deployments/{DEPLOYMENT}"
    while True:  # polled: a watch for one field of one object is not worth it here
        deployment = await transport.request("GET", path)
        if (deployment.get("status") or {}).get("readyReplicas"):
            break
        await anyio.sleep(1)
    for obj in configurations:
        try:
            await transport.request("POST", path_of(obj), body=obj)
        except ApiError as err:
            if err.status != 409:  # registered by an earlier attempt
                raise
    say("webhooks", "registered: creates and spec changes of CAPTF objects are reviewed")


async def _reconcile_errors(transport: Transport) -> float:
    path = resource_path(PODS, CONTROLLER_NAMESPACE)
    pods = await transport.request("GET", path, params={"labelSelector": CONTROLLER_PODS})
    family = "controller_runtime_reconcile_errors"  # the parser drops `_total`
    return await anyio.to_thread.run_sync(scrape_sum, pods["items"], family)


def _objects(kubeconfig: bytes, images: dict[str, str]) -> list[Json]:
    """Everything `make run` applies after the controller, in order: the credentials (the
    runner's RBAC is the controller's to provide), each cluster's workload kubeconfig,
    then examples/clusterapi with the module images pushed (`images`) in place of the
    example references. The flaky cluster's module is the cluster module given with its
    failing resource added."""
    docs = [*_documents(CREDENTIALS)]
    docs += [workload.kubeconfig_secret(name, kubeconfig) for name in CLUSTERS]
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += [module_images.point_at(doc, images) for doc in _documents(path)]
    return docs


def _documents(path: Path) -> list[Json]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _collection(obj: Json) -> str:
    return resource_path(EXAMPLE_RESOURCES[obj["kind"]], NAMESPACE)
