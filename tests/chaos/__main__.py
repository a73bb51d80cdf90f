"""`python -m tests.chaos [--faults N] ...`: one run; the report is the last stdout line."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import orjson

from tests.chaos.jobrunner import RUNNERS
from tests.chaos.run import Config, run


def main(argv: list[str] | None = None) -> int:
    d = Config()
    p = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    p.add_argument("--faults", type=int, default=d.faults, help="faults to inject")
    p.add_argument("--objects", type=int, default=d.objects, help="clusters, pools, machines")
    p.add_argument("--max-concurrent-runs", type=int, default=d.max_concurrent_runs)
    p.add_argument("--time-scale", type=float, default=d.time_scale)
    p.add_argument("--rate", type=float, default=d.rate, help="faults/s in each fast lane")
    p.add_argument("--fail-ratio", type=float, default=d.fail_ratio)
    p.add_argument("--restarts", type=int, default=None, help="API server restarts")
    p.add_argument("--converge-within", type=float, default=d.converge_within)
    p.add_argument("--runner", choices=sorted(RUNNERS), default=d.runner)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--workdir", type=Path, default=d.workdir, help="logs of every process")
    a = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    cfg = Config(
        faults=a.faults,
        objects=a.objects,
        max_concurrent_runs=a.max_concurrent_runs,
        time_scale=a.time_scale,
        rate=a.rate,
        fail_ratio=a.fail_ratio,
        restarts=a.restarts,
        converge_within=a.converge_within,
        runner=a.runner,
        seed=a.seed,
        workdir=a.workdir,
    )
    result = run(cfg)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
