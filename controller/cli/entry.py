"""The `captf` program: `captf runner` (the runner image's entrypoint, run once per
Job) goes straight to the runner; every other command to the full command line
(controller/cli/main.py). Building that parser imports the controller's settings and
the core's face, which a runner pod would pay for on every start and never use. The
arrow goes one way: main.py never imports this module (an import-linter contract)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from controller.cli.no_cluster import no_cluster
from runtime.errors import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["runner"]:  # it takes no arguments: `captf runner --help` goes the long way
        from controller.runner.main import run

        try:
            return run(argparse.Namespace(command="runner"))
        except ConfigError as err:
            return no_cluster(err)
    from controller.cli.main import main as full

    return full(args)


if __name__ == "__main__":
    sys.exit(main())
