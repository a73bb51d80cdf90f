"""An apply that carries out an approved plan: the checks that the fresh plan is the one a
person approved (its changes against the approved plan Secret's, its fingerprint against
the one the TerraformPlan showed). Any difference ends the apply `plan-changed`."""

from __future__ import annotations

import base64

import orjson

from controller.core.basics.names import LABEL_KIND, LABEL_PLAN_OF, PLAN_JSON_KEY
from controller.core.jobs.run_report import ErrorKind
from controller.runner import plans
from controller.runner.op_context import OpContext, Stop, failed
from runtime.jsonobj import Json


def plan_of_object(ctx: OpContext, secret: Json) -> bool:
    """A plan Secret of this object: its plan-of label names it, and its kind label (plans
    written before it existed carry none) names its kind."""
    labels = (secret.get("metadata") or {}).get("labels") or {}
    kind = labels.get(LABEL_KIND, ctx.env.object_kind)
    return labels.get(LABEL_PLAN_OF) == ctx.env.object_name and kind == ctx.env.object_kind


async def approved_plan(ctx: OpContext, name: str) -> Json:
    secret = await ctx.kube.get_secret(name)
    raw = ((secret or {}).get("data") or {}).get(PLAN_JSON_KEY)
    if raw is None:
        text = f"approved plan Secret {name} not found or has no {PLAN_JSON_KEY}"
        raise Stop(failed(text, ErrorKind.INPUTS))
    if not plan_of_object(ctx, secret or {}):
        text = f"approved plan Secret {name} is not labelled as a plan of this object"
        raise Stop(failed(text, ErrorKind.INPUTS))
    parsed: Json = orjson.loads(base64.b64decode(raw))
    return parsed


async def unapproved(ctx: OpContext, plan: Json) -> str | None:
    """Why the fresh plan is not the approved one, or None: its changes differ from the
    approved plan Secret's (named), or its fingerprint from the one the approver saw."""
    approved_name = ctx.env.approved_plan_secret
    if approved_name is not None:
        differing = plans.differences(await approved_plan(ctx, approved_name), plan)
        if differing:
            named = ", ".join(differing)
            return f"the plan no longer matches approved plan {approved_name}: {named}"
    expected = ctx.env.approved_fingerprint
    found = plans.summarize(plan).fingerprint
    if expected is not None and found != expected:
        shown = f"fingerprint {found}, approved {expected}"
        return f"the plan's changes are not the approved ones ({shown})"
    return None
