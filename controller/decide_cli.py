"""`captf decide`: the decision DecideOp makes for one object, as one JSON line.

`-f FILE` decides on a snapshot file; `--live KIND/NAME` reads the same snapshot
from the cluster. Bad input is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

import orjson

from controller.core import snapshot
from controller.core.decide import decide
from controller.core.decision import to_json
from controller.core.policy import runner_policy
from controller.snapshot_file import SnapshotError, load

EXIT_BAD_INPUT = 2


def run(args: argparse.Namespace) -> int:
    source = args.file or args.live
    if args.max_concurrent_runs < 1:  # as `captf run` refuses it
        return _bad_input(
            f"--max-concurrent-runs must be at least 1, got {args.max_concurrent_runs}"
        )
    if args.file and args.now is not None:
        return _bad_input("--now goes with --live; a snapshot file carries its own `now`")
    try:
        now, objects = _read(args)
        snap = snapshot.build(
            objects[0],
            objects[1:],
            max_concurrent_runs=args.max_concurrent_runs,
            runner=runner_policy(args),
        )
        decision = decide(snap, now)
    except SnapshotError as err:
        return _bad_input(str(err))
    except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as err:
        # An object whose shape no API server returns (a list where a mapping belongs, ...).
        return _bad_input(f"cannot decide on {source}: {type(err).__name__}: {err}")
    sys.stdout.write(orjson.dumps(to_json(decision, verbose=args.verbose)).decode() + "\n")
    return 0


def _read(args: argparse.Namespace) -> tuple[datetime, list[dict[str, Any]]]:
    if args.live:
        # The I/O stack, only when asked.
        from controller.io.live import live_snapshot
        from runtime.errors import ConfigError

        try:
            return live_snapshot(args)
        except ConfigError as err:  # no kubeconfig, or one without a current context
            raise SnapshotError(f"no cluster to read from: {err}") from None
    return load(args.file)


def _bad_input(message: str) -> int:
    print(f"captf decide: {' '.join(message.split())}", file=sys.stderr)  # always one line
    return EXIT_BAD_INPUT
