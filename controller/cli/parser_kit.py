"""What every `captf` sub-parser builder shares: a command body imported only when
its command runs (so `captf decide -f` never loads the I/O stack), and --kubeconfig."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

Command = Callable[[argparse.Namespace], int]


def handler(module: str, attr: str = "run") -> Callable[[argparse.Namespace], int]:
    """A command body, imported on first call."""

    def call(args: argparse.Namespace) -> int:
        fn: Command = getattr(importlib.import_module(module), attr)
        return fn(args)

    return call


def add_kubeconfig(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster config)",
    )


def add_live(p: argparse.ArgumentParser) -> None:
    """--kubeconfig and --request-timeout: the flags of a command that reads the live
    cluster (controller/cli/live_transport.py)."""
    from controller.cli.live_transport import DEFAULT_REQUEST_TIMEOUT, request_timeout

    add_kubeconfig(p)
    p.add_argument(
        "--request-timeout",
        type=request_timeout,
        default=DEFAULT_REQUEST_TIMEOUT,
        metavar="DURATION",
        help="how long one request may wait out the API server's momentary trouble "
        "(429, 5xx, a refused connection), each wait said on stderr, e.g. 30s or 2m "
        "(default: 60s)",
    )
