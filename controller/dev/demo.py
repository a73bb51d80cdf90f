"""`captf dev run` (`make run`): the whole system on this machine, with a live timeline.

A real kube-apiserver, etcd and kube-controller-manager; the controller installed from
manifests/ as users install it (the kustomization rendered here, then applied): its
Deployment of two leader-elected replicas under the ServiceAccount `captf-controller`;
a process node running every pod (the controller's, and each runner's with the real
OpenTofu) as a local process; and the objects of examples/objects with the runner's
RBAC. Time is compressed (--time-scale): the 1-minute first retry takes 60/K seconds."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import yaml

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
    SERVICE_ACCOUNTS,
    resource_path,
)
from controller.io.main import TIME_ORIGIN
from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from runtime.cache.resource import Resource
from runtime.envtest import ApiServer
from runtime.timeorigin import scaled_clock
from runtime.transport import Transport, open_transport

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
EXAMPLES = REPO / "examples" / "objects"
CRDS = MANIFESTS / "crds"
RUNNER_RBAC = MANIFESTS / "runner-rbac.yaml"
KUBECONFIG = Path(".local/kubeconfig")
NAMESPACE = "default"
# What the examples and the runner's RBAC hold, by kind.
_EXAMPLE_RESOURCES = {
    **OBJECTS,
    **CAPI_OBJECTS,
    "Secret": SECRETS,
    "ConfigMap": CONFIGMAPS,
    "ServiceAccount": SERVICE_ACCOUNTS,
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles"),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings"),
}
Json = dict[str, Any]


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        print("building or finding OpenTofu and the local provider ...", flush=True)
        tofu = tofu_dir(build=True)
    except TofuMissing as err:
        print(f"captf dev run: {err}", file=sys.stderr)
        return 2
    Path("/tmp/captf-demo-flaky-counter").unlink(missing_ok=True)
    with ApiServer(kubeconfig=KUBECONFIG, controller_manager=True) as server:
        server.install_crds(CRDS)
        took = f"{server.startup_seconds:.1f}s"
        kcm = f"{server.controller_manager_seconds:.1f}s"
        print(f"API server ready at {server.url} ({took}); kubeconfig {KUBECONFIG}")
        print(f"kube-controller-manager ready ({kcm}): Job status comes from its Job controller")
        port = free_port()
        apply(
            server,
            on_process_node(render(MANIFESTS), metrics_port=port, time_scale=args.time_scale),
        )
        print(
            f"applied manifests/ (kustomization): Deployment {CONTROLLER_NAMESPACE}/{DEPLOYMENT},"
            f" 2 replicas; each serves /metrics on port {port} of its pod IP"
        )
        for obj in [*_documents(RUNNER_RBAC), *_examples()]:
            server.request("POST", _collection(obj), obj)
        minute = 60 / args.time_scale
        print(f"applied examples/objects; time scale {args.time_scale:g} (1m lasts {minute:.1f}s)")
        print("Ctrl-C stops everything.\n")
        anyio.run(_run_all, args, tofu)
    return 0


async def _run_all(args: argparse.Namespace, tofu: Path) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_transport(str(KUBECONFIG)) as transport, anyio.create_task_group() as tg:
            # Recorded before any replica starts (their ServiceAccount may read it, not
            # create it): every replica and this timeline then share one scaled timeline.
            clock = await scaled_clock(
                transport, CONTROLLER_NAMESPACE, TIME_ORIGIN, args.time_scale
            )
            images = default_images(runner_environ(tofu))
            async with ProcessNode(transport, images=images, log_dir=".local/pod-logs"):
                timeline = Timeline(
                    transport,
                    clock=clock,
                    scale=args.time_scale,
                    deployment=(CONTROLLER_NAMESPACE, DEPLOYMENT),
                )
                tg.start_soon(timeline.run)
                async for _ in signals:
                    break
                errors = await _reconcile_errors(transport)
                print("\nstopping: controller pods, node, control plane ...", flush=True)
            tg.cancel_scope.cancel()
    print(f"controller_runtime_reconcile_errors_total {errors:g} (every replica, while it ran)")


async def _reconcile_errors(transport: Transport) -> float:
    path = resource_path(PODS, CONTROLLER_NAMESPACE)
    pods = await transport.request("GET", path, params={"labelSelector": CONTROLLER_PODS})
    family = "controller_runtime_reconcile_errors"  # the parser drops `_total`
    return await anyio.to_thread.run_sync(scrape_sum, pods["items"], family)


def _examples() -> list[Json]:
    docs: list[Json] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += _documents(path)
    return docs


def _documents(path: Path) -> list[Json]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _collection(obj: Json) -> str:
    return resource_path(_EXAMPLE_RESOURCES[obj["kind"]], NAMESPACE)
