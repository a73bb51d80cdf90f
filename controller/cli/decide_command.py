"""`captf decide`: the decision DecideOp makes for one object, as one JSON line.

`-f FILE...` decides on snapshot files, one line each (prefixed with the file name when
there are several, as `grep` does); `--live KIND/NAME` reads the snapshot from the
cluster. Bad input is one line on stderr naming what is wrong; the other files are
still decided, and the exit status is 2 if any input was bad."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

import orjson

from controller.cli.decide_settings import settings_for
from controller.cli.snapshot_file import FILE_FLAGS, SnapshotError, SnapshotFile, read
from controller.core.decide import snapshot
from controller.core.decide.decision import Decision, to_json
from controller.core.decide.facts import NO_FACTS, Facts
from controller.core.decide.runner_rbac import RunnerFacts
from controller.core.decide.settings import Settings
from controller.core.plan.decided import decision_of
from controller.core.plan.planner import live_check_needed

EXIT_BAD_INPUT = 2

# --live's reads beyond the objects: the namespace's runner RBAC (None: not read).
LiveObjects = tuple[datetime, list[dict[str, Any]], RunnerFacts | None]


def run(args: argparse.Namespace) -> int:
    for flag in ("max-concurrent-runs", "max-concurrent-runs-per-cluster"):
        given, least = getattr(args, flag.replace("-", "_")), FILE_FLAGS[flag] or 0
        if given is not None and given < least:  # as `captf run` refuses it
            return _bad_input(f"--{flag} must be at least {least}, got {given}")
    if args.file and args.now is not None:
        return _bad_input("--now goes with --live; a snapshot file carries its own `now`")
    if args.live:
        return _decide_one(args, args.live, partial(_read_live, args), prefix="")
    files: list[str] = args.file
    if files.count("-") > 1:
        return _bad_input("standard input (-) can be read only once")
    several = len(files) > 1
    statuses = [
        _decide_one(args, path, partial(read, path), prefix=f"{path}: " * several) for path in files
    ]
    return max(statuses)


def _decide_one(
    args: argparse.Namespace,
    source: str,
    read_source: Callable[[], SnapshotFile | LiveObjects],
    *,
    prefix: str,
) -> int:
    """Decides on what `read_source()` returns and prints the line; the exit status."""
    try:
        read_back = read_source()
        if isinstance(read_back, SnapshotFile):  # -f: no Facts
            found, live, runner = read_back, False, None
        else:  # --live: with the runner RBAC it read
            now, objects, runner = read_back
            found, live = SnapshotFile(now, objects), True
        # As `captf run` builds its own from the same flags (decide_settings.py).
        settings = settings_for(args, found.flags, found.objects)
        decision = decided(found.now, found.objects, settings, live=live, runner=runner)
    except SnapshotError as err:  # a file's error names the file
        return _bad_input(str(err))
    except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as err:
        # An object whose shape no API server returns (a list where a mapping belongs, ...).
        return _bad_input(f"cannot decide on {source}: {type(err).__name__}: {err}")
    line = orjson.dumps(to_json(decision, verbose=args.verbose)).decode()
    sys.stdout.write(f"{prefix}{line}\n")
    sys.stdout.flush()  # each file's line as soon as it is decided, in order with stderr
    return 0


def decided(
    now: datetime,
    objects: list[dict[str, Any]],
    settings: Settings,
    *,
    live: bool = False,
    runner: RunnerFacts | None = None,
) -> Decision:
    """The decision the controller carries out (plan/decided.py: decision_of) on the snapshot of
    `objects`, the object first. A live read's Facts are what it read: the runner RBAC,
    and a status.activeJob whose Job is not among the Jobs listed now is gone (the two
    live reads the controller makes, both done); nothing of a process's memory."""
    snap = snapshot.build(objects[0], objects[1:])
    facts: Facts = NO_FACTS
    if live:
        gone = live_check_needed(snap, frozenset()) is not None
        facts = Facts(active_gone=gone, runner=runner)
    return decision_of(snap, now, settings=settings, facts=facts)


def _read_live(args: argparse.Namespace) -> LiveObjects:
    # The I/O stack, only when asked.
    from controller.cli.live import Source, live_snapshot
    from runtime.errors import ConfigError

    source = Source(
        kubeconfig=args.kubeconfig,
        namespace=args.namespace,
        request_timeout=args.request_timeout,
    )
    try:
        return live_snapshot(args.live, now=args.now, source=source)
    except ConfigError as err:  # no kubeconfig, or one without a current context
        raise SnapshotError(f"no cluster to read from: {err}") from None


def _bad_input(message: str) -> int:
    print(f"captf decide: {' '.join(message.split())}", file=sys.stderr)  # always one line
    return EXIT_BAD_INPUT
