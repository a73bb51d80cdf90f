"""`captf plan show KIND/NAME` (the plan the object waits on, else its newest) or
`captf plan show PLAN`: a TerraformPlan in human form.

What it shows comes from the TerraformPlan: phase, who approved, counts, addresses
and actions, never a value. When the reader may read the plan Secret (named after
the plan) and it is still there, the plan's changes follow, as `tofu show` would
print them, sensitive values masked. For KIND/NAME it ends with what the object's
newest run planned (status.lastRun.changes) and what its policies found
(PolicyCompliant): an object in Auto mode may have no TerraformPlan at all."""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii

import orjson

from controller.cli.live import Source
from controller.cli.people.common import Refused, run_command, source_of
from controller.cli.people.plan_text import render_plan
from controller.cli.people.plans import (
    Plans,
    changes_text,
    phase_of,
    read_plan,
    read_plans,
)
from controller.core.basics import changes
from controller.core.basics.names import COND_POLICY_COMPLIANT, PLAN_JSON_KEY
from controller.core.basics.plan_summary import COUNTED
from controller.core.decide.approvals import Phase, spec_of, status_of
from controller.io import api
from runtime.errors import ApiError
from runtime.jsonobj import Json


def _show(args: argparse.Namespace) -> int:
    source = source_of(args)
    if "/" in args.ref:
        found = read_plans(args.ref, source=source)
        if not found.plans:
            print("\n".join(newest_run(found.who, found.obj)))
            return 0
        plan = _chosen(found)
    else:
        plan = read_plan(args.ref, source=source)
    print("\n".join(describe(plan)))
    details = _saved_plan(source, plan["metadata"]["name"])
    if details is not None:
        print("\n" + "\n".join([details] if isinstance(details, str) else render_plan(details)))
    if "/" in args.ref:
        print("\n" + "\n".join(newest_run(found.who, found.obj)))
    if phase_of(plan) == Phase.PENDING and not spec_of(plan).get("approved"):
        target = spec_of(plan).get("target") or {}
        print(f"\nTo approve it: captf approve {target.get('kind')}/{target.get('name')}")
    return 0


def newest_run(who: str, obj: Json) -> list[str]:
    """What the object's newest run planned, per action, and what its policies found."""
    status = obj.get("status") or {}
    last = status.get("lastRun") or {}
    found = changes.from_json(last.get("changes"))
    if found is None:
        lines = [f"{who}: its newest run reported no plan"]
    else:
        run = f"{last.get('job', '?')} ({last.get('op', '?')} {last.get('result', '?')})"
        lines = [f"{who}: newest run {run}"]
        lines += by_action(found)
    policy = next(
        (c for c in status.get("conditions") or [] if c.get("type") == COND_POLICY_COMPLIANT),
        None,
    )
    if policy is not None:
        lines.append(f"Policies:     {policy.get('reason')}: {policy.get('message')}")
    return lines


def by_action(found: changes.Changes) -> list[str]:
    """`Changes: ...` and, per action with a count, its first addresses."""
    lines = [f"Changes:      {found.line()}"]
    for action in changes.COUNTED:
        count = found.counts.get(action, 0)
        if not count:
            continue
        listed = found.addresses.get(action, ())
        more = f" (and {count - len(listed)} more)" if count > len(listed) else ""
        lines.append(f"  {action} {count}: {', '.join(listed) or '-'}{more}")
    return lines


def _chosen(found: Plans) -> Json:
    """The plan that waits, else the newest."""
    pending = [p for p in found.plans if phase_of(p) == Phase.PENDING]
    if pending:
        return pending[0]
    if not found.plans:
        raise Refused(f"{found.who} has no TerraformPlan: nothing of it waited for approval")
    return found.plans[0]


def describe(plan: Json) -> list[str]:
    """The plan's lines: what it is, its phase and approval, its changes."""
    spec, status = spec_of(plan), status_of(plan)
    target = spec.get("target") or {}
    approved = "yes" if spec.get("approved") is True else "no"
    listed = status.get("resources") or []
    counts = status.get("counts") or {}
    total = sum(int(counts.get(a, 0)) for a in COUNTED)
    lines = [
        f"TerraformPlan {plan['metadata']['name']} of {target.get('kind')}/{target.get('name')}",
        f"Phase:        {phase_of(plan)}",
        f"Approved:     {approved}",
        f"Approved by:  {spec.get('approvedBy') or '-'}",
        f"Inputs hash:  {status.get('inputsHash') or '-'}",
        f"Fingerprint:  {status.get('fingerprint') or '-'}",
        f"Changes:      {changes_text(plan)}",
    ]
    shown = changes.from_json(status.get("changes"))
    if shown is not None:
        lines += ["Per action:", *(f"  {line.strip()}" for line in by_action(shown)[1:])]
    width = max((len(str(r.get("action", ""))) for r in listed), default=0)
    lines += [f"  {str(r.get('action', '')).ljust(width)}  {r.get('address', '')}" for r in listed]
    if total > len(listed):
        lines.append(f"  ({len(listed)} of {total} listed)")
    return lines


def _saved_plan(source: Source, name: str) -> Json | str | None:
    """The plan Secret's plan; a line saying why not when it cannot be read; None when gone."""

    async def get() -> Json | None:
        async with source.open() as t:
            return await api.get_or_none(t, api.secret_path(source.namespace, name))

    try:
        secret = asyncio.run(get())
    except ApiError as err:
        if err.status == 403:
            return f"(the plan's values are in Secret {name}, which you may not read)"
        raise
    raw = ((secret or {}).get("data") or {}).get(PLAN_JSON_KEY)
    if raw is None:
        return None
    try:
        plan = orjson.loads(base64.b64decode(raw))
    except (binascii.Error, orjson.JSONDecodeError):
        return f"(plan Secret {name} holds no readable plan)"
    return plan if isinstance(plan, dict) else None


run = run_command("plan show", _show)
