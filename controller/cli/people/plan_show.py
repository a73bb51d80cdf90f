"""`captf plan show KIND/NAME`: the plan that waits for approval, in human form.

The waiting Job is found as `captf approve` finds it. A plan Job's plan is in the
Secret its result names; an apply that waits (blocked, or its plan changed) shows
the plan it carried out in Manual mode, else the message its runner left, which
names what it would destroy (in Auto mode no plan is kept)."""

from __future__ import annotations

import argparse
import base64
import binascii
from typing import Any

import orjson

from controller.cli.people.common import Refused, run_command, source_of
from controller.cli.people.plan_text import render_plan
from controller.cli.people.waiting import Live, read_live, waiting_job
from controller.core.basics.names import ANN_APPROVE, ANN_PLAN_JOB, Op
from controller.core.jobs.job import annotations_of, name_of, op_of, result
from controller.runner.ops import PLAN_JSON_KEY

Json = dict[str, Any]


def _show(args: argparse.Namespace) -> int:
    live = read_live(args.ref, source=source_of(args))
    waiting = waiting_job(live)
    jobs = {name_of(j): j for j in live.snap.jobs}
    job = jobs.get(waiting)
    if job is None:
        raise Refused(f"Job {waiting} that {live.who} waits on is gone")
    print(f"{live.who} waits for approval of Job {waiting} ({op_of(job)}).")
    # Redacted again as the controller does: the runner's pass is the first, not the only.
    message = live.snap.redactor(job).text(str((result(job) or {}).get("message") or ""))
    if message:
        print(f"Its runner said: {message}")
    plan_job = job if op_of(job) == Op.PLAN else jobs.get(annotations_of(job).get(ANN_PLAN_JOB, ""))
    plan = _saved_plan(live, plan_job)
    if plan is None:
        print("No saved plan: an apply in Auto mode keeps only its runner's message.")
    else:
        print(f"\nPlan {name_of(plan_job or {})}:")
        print("\n".join(render_plan(plan)))
    print(f"\nTo let it proceed: captf approve {live.kind}/{live.name}  ({ANN_APPROVE}={waiting})")
    return 0


def _saved_plan(live: Live, plan_job: Json | None) -> Json | None:
    if plan_job is None:
        return None
    secret_name = str((result(plan_job) or {}).get("planSecret") or "")
    secret = live.snap.secrets.get(secret_name)
    raw = ((secret or {}).get("data") or {}).get(PLAN_JSON_KEY)
    if raw is None:
        raise Refused(f"plan Secret {secret_name or '?'} of Job {name_of(plan_job)} is gone")
    try:
        plan = orjson.loads(base64.b64decode(raw))
    except (binascii.Error, orjson.JSONDecodeError):
        raise Refused(f"plan Secret {secret_name} holds no readable plan") from None
    return plan if isinstance(plan, dict) else None


run = run_command("plan show", _show)
