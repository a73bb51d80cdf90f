"""`captf dev run` (`make run`): the whole system on this machine, with a live timeline.

A real kube-apiserver, etcd and kube-controller-manager, the process node running
each runner pod as a local `captf runner` with the real OpenTofu, the controller,
and the objects of examples/objects (with the runner's RBAC from manifests/). Time is
compressed (--time-scale): the 1-minute first retry takes 60/K seconds."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import yaml
from prometheus_client import CollectorRegistry

from controller.core.names import API_VERSION, KINDS, PLURALS
from controller.dev.node import ProcessNode, default_images
from controller.io.config import ControllerConfig
from controller.io.main import TIME_ORIGIN, reconcile_errors, serve
from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from controller.timeline import Timeline
from runtime.envtest import ApiServer
from runtime.timeorigin import scaled_clock
from runtime.transport import open_transport

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "objects"
CRDS = REPO / "manifests" / "crds"
RUNNER_RBAC = REPO / "manifests" / "runner-rbac.yaml"
KUBECONFIG = Path(".local/kubeconfig")
NAMESPACE = "default"
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
        for obj in [*_documents(RUNNER_RBAC), *_examples()]:
            server.request("POST", _collection(obj), obj)
        minute = 60 / args.time_scale
        print(f"applied examples/objects; time scale {args.time_scale:g} (1m lasts {minute:.1f}s)")
        print("Ctrl-C stops everything.\n")
        anyio.run(_run_all, args, tofu, str(KUBECONFIG.absolute()))
    return 0


async def _run_all(args: argparse.Namespace, tofu: Path, kubeconfig: str) -> None:
    os.environ["KUBECONFIG"] = kubeconfig
    controller_args = ControllerConfig(
        kubeconfig=str(KUBECONFIG),
        controller_namespace=NAMESPACE,
        workers=4,
        leader_elect=False,
        time_scale=args.time_scale,
    )
    registry = CollectorRegistry()
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_transport(str(KUBECONFIG)) as transport, anyio.create_task_group() as tg:
            # One timeline for the controller and the timeline view, and for a `captf run
            # --time-scale` started against this API server later: its origin is recorded in
            # the API server (runtime/timeorigin.py). The node and the Job controller keep
            # real time; the controller moves Job times onto this timeline.
            clock = await scaled_clock(transport, NAMESPACE, TIME_ORIGIN, args.time_scale)
            tg.start_soon(partial(serve, controller_args, None, clock, registry=registry))
            images = default_images(runner_environ(tofu))
            async with ProcessNode(transport, images=images, log_dir=".local/pod-logs"):
                timeline = Timeline(transport, clock=clock, scale=args.time_scale)
                tg.start_soon(timeline.run)
                async for _ in signals:
                    print("\nstopping: controller, node, control plane ...", flush=True)
                    break
            tg.cancel_scope.cancel()
    print(f"controller_runtime_reconcile_errors_total {reconcile_errors(registry):g}")


def _examples() -> list[Json]:
    docs: list[Json] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += _documents(path)
    return docs


def _documents(path: Path) -> list[Json]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _collection(obj: Json) -> str:
    kind = obj["kind"]
    if kind in KINDS:
        return f"/apis/{API_VERSION}/namespaces/{NAMESPACE}/{PLURALS[kind]}"
    if kind in ("Role", "RoleBinding"):
        return f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/{kind.lower()}s"
    plural = {"Secret": "secrets", "ConfigMap": "configmaps", "ServiceAccount": "serviceaccounts"}
    return f"/api/v1/namespaces/{NAMESPACE}/{plural[kind]}"
