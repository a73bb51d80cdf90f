"""`captf dev node`, `captf dev drain` and `captf dev uncordon`.

`captf dev node` runs the process node in the foreground until Ctrl-C or
SIGTERM (a graceful node shutdown: every pod is stopped and marked so). Pod
logs go to `--log-dir` (default `$CAPTF_NODE_LOGS`, else `.local/pod-logs`)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

import anyio

from controller.core.basics.runner_vars import RunnerVar
from controller.dev.node.drain import cordon, drain
from controller.dev.node.images import ImageTable, default_images
from controller.dev.node.node import ProcessNode
from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from runtime.builds import BuildFailed, built_dir
from runtime.clock import LoopClock
from runtime.envtest.registry import RegistryMissing, registry_dir
from runtime.transport import open_transport

LOG_DIR_ENV = "CAPTF_NODE_LOGS"
COPIER_SCRIPT = Path(__file__).resolve().parents[3] / "hack" / "copier" / "build.sh"
DEFAULT_LOG_DIR = ".local/pod-logs"

logger = logging.getLogger("controller.dev.node")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s node %(message)s"
    )
    anyio.run(_serve, args)
    return 0


def images() -> ImageTable:
    """The default table, with the OpenTofu build and crane as the captf image's ENV when
    they exist (the controller looks module images up with crane)."""
    found = crane()
    env = {"CAPTF_CRANE": str(found)} if found is not None else {}
    copy = copier()
    if copy is not None:
        env[RunnerVar.COPIER.value] = str(copy)
    try:
        return default_images(runner_environ(tofu_dir(build=False)) | env)
    except TofuMissing as exc:
        logger.warning("no OpenTofu build, runner pods will not find tofu: %s", exc)
        return default_images(env)


def copier() -> Path | None:
    """The static copier the captf image provides for a module image Job's copy shape:
    hack/copier's build (stdlib Go, about a second when not cached)."""
    try:
        return built_dir(COPIER_SCRIPT) / "captf-copy"
    except BuildFailed as exc:
        logger.warning("no copier build, the copy shape of module images cannot run: %s", exc)
        return None


def crane() -> Path | None:
    """What image volumes are pulled with: hack/registry's build, when there is one."""
    try:
        return registry_dir(build=False) / "crane"
    except RegistryMissing as exc:
        logger.warning("no registry build, image volumes cannot be pulled: %s", exc)
        return None


async def _serve(args: argparse.Namespace) -> None:
    log_dir = args.log_dir or os.environ.get(LOG_DIR_ENV) or DEFAULT_LOG_DIR
    table = await anyio.to_thread.run_sync(images)
    puller = await anyio.to_thread.run_sync(crane)
    async with (
        open_transport(args.kubeconfig) as transport,
        ProcessNode(
            transport,
            images=table,
            name=args.name,
            namespace=args.namespace,
            log_dir=log_dir,
            crane=puller,
        ),
    ):
        scope = args.namespace or "all namespaces"
        logger.info("node %s runs pods of %s; logs in %s", args.name, scope, log_dir)
        # The first Ctrl-C leaves the node's block, which stops every pod and waits for it;
        # the receiver is closed by then, so a second Ctrl-C interrupts at once.
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for received in signals:
                name = signal.Signals(received).name
                logger.info("%s: stopping every pod (again to quit at once)", name)
                break


def run_drain(args: argparse.Namespace) -> int:
    async def main() -> list[str]:
        async with open_transport(args.kubeconfig) as transport:
            return await drain(
                transport,
                args.node,
                LoopClock(),
                namespace=args.namespace,
                label_selector=args.selector,
                timeout=args.timeout,
            )

    evicted = anyio.run(main)
    print(f"node/{args.node} cordoned; evicted {len(evicted)} pod(s)")
    for key in evicted:
        print(f"  {key}")
    return 0


def run_uncordon(args: argparse.Namespace) -> int:
    async def main() -> None:
        async with open_transport(args.kubeconfig) as transport:
            await cordon(transport, args.node, unschedulable=False)

    anyio.run(main)
    print(f"node/{args.node} uncordoned")
    return 0
