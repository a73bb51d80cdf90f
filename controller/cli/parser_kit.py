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


def add_background_budget(p: argparse.ArgumentParser, defaults: tuple[float, int] | None) -> None:
    """`--background-run-share` and `--background-jobs-per-minute`: `captf run`'s with its
    `defaults`; `captf decide`'s (None) unset, so that a snapshot file's flags apply
    (docs/controller.md#the-background-budget)."""
    share, per_minute = defaults if defaults is not None else (None, None)
    said = (
        " (default: %(default)s)" if defaults is not None else " (default: the file's, else run's)"
    )
    p.add_argument(
        "--background-run-share",
        type=float,
        default=share,
        help="of the run slots, the share background Jobs (drift checks, health and membership"
        " re-reads, refreshes) may hold at once; changes may hold them all, and a change"
        " waiting takes the next free slot (more than 0, at most 1)" + said,
    )
    p.add_argument(
        "--background-jobs-per-minute",
        type=int,
        default=per_minute,
        help="background Jobs the objects of one set of credentials may start a minute, unless"
        " its TerraformClusterIdentity says spec.backgroundJobsPerMinute; their schedules"
        " stretch to fit (1 to 1000)" + said,
    )
