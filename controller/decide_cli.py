"""`captf decide`: the decision DecideOp makes for one object, as one JSON line.

`-f FILE` decides on a snapshot file; `--live KIND/NAME` reads the same snapshot
from the cluster. Bad input is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys

import orjson

from controller.core import snapshot
from controller.core.decide import decide
from controller.core.decision import to_json
from controller.snapshot_file import SnapshotError, load

EXIT_BAD_INPUT = 2


def run(args: argparse.Namespace) -> int:
    try:
        if args.live:
            from controller.io.live import live_snapshot  # the I/O stack, only when asked

            now, objects = live_snapshot(args)
        else:
            now, objects = load(args.file)
    except SnapshotError as err:
        print(f"captf decide: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        snap = snapshot.build(objects[0], objects[1:], max_concurrent_runs=args.max_concurrent_runs)
        decision = decide(snap, now)
    except (LookupError, TypeError, ValueError, AttributeError) as err:
        # An object whose shape no API server returns (a list where a mapping belongs, ...).
        source = args.file or args.live
        why = " ".join(f"{type(err).__name__}: {err}".split())  # one line, whatever err says
        print(f"captf decide: cannot decide on {source}: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(orjson.dumps(to_json(decision, verbose=args.verbose)).decode() + "\n")
    return 0
