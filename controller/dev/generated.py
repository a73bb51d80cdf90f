"""Files in the repository generated from manifests/ (the Helm chart, the clusterctl
repository): the one way a generator is run, or checked against what is checked in."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def run_generator(
    args: argparse.Namespace,
    *,
    target: Path,
    differences: Callable[[Path], list[str]],
    write: Callable[[Path], None],
    error: type[Exception],
    verb: str,
) -> int:
    """`--check`: exit 1 naming what differs; else write. A manifest the generator cannot
    follow (`error`) exits 2 with its message."""
    root = Path(args.root)
    try:
        if args.check:
            stale = differences(root)
            if stale:
                print(
                    f"{target} differs from what manifests/ generate: {', '.join(stale)}; "
                    f"run `{verb}`",
                    file=sys.stderr,
                )
                return 1
            return 0
        write(root)
    except error as err:
        print(f"{verb}: {err}", file=sys.stderr)
        return 2
    return 0
