"""`captf dev executor`: run Jobs of the local API server as local processes until Ctrl-C.

The per-Job log directory is `$CAPTF_EXECUTOR_LOGS`, else `.local/executor-logs`."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

import anyio

from controller.executor.executor import DEFAULT_LOG_DIR, Executor
from runtime.transport import open_transport

LOG_DIR_ENV = "CAPTF_EXECUTOR_LOGS"

logger = logging.getLogger("controller.executor")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s executor %(message)s"
    )
    anyio.run(_serve, args)
    return 0


async def _serve(args: argparse.Namespace) -> None:
    log_dir = getattr(args, "log_dir", None) or os.environ.get(LOG_DIR_ENV) or DEFAULT_LOG_DIR
    async with (
        open_transport(args.kubeconfig) as transport,
        Executor(
            transport,
            time_scale=args.time_scale,
            namespace=args.namespace,
            kubeconfig=args.kubeconfig,
            log_dir=log_dir,
        ),
    ):
        scope = args.namespace or "all namespaces"
        logger.info(
            "watching Jobs in %s, time scale %g, logs in %s", scope, args.time_scale, log_dir
        )
        # The first Ctrl-C leaves the Executor block, which stops every process and waits
        # for it; the receiver is closed by then, so a second Ctrl-C interrupts at once.
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for received in signals:
                name = signal.Signals(received).name
                logger.info("%s: stopping every process (again to quit at once)", name)
                break
