"""`captf approve KIND/NAME`: annotates captf.io/approve with exactly the Job that waits."""

from __future__ import annotations

import argparse

from controller.cli.people.annotate import annotate
from controller.cli.people.common import run_command, source_of
from controller.cli.people.waiting import read_live, waiting_job
from controller.core.basics.names import ANN_APPROVE


def _approve(args: argparse.Namespace) -> int:
    live = read_live(args.ref, source=source_of(args))
    job = waiting_job(live)
    annotate(args.kubeconfig, live.snap.obj, {ANN_APPROVE: job})
    print(f"{live.who}: approved Job {job} (captf.io/approve={job})")
    return 0


run = run_command("approve", _approve)
