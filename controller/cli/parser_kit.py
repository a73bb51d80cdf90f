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
