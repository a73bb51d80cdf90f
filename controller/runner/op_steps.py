"""The runner's steps of each op after `_prepare` (controller/runner/ops.py holds the
table of which op runs which): tofu's commands, the plan, state and outputs Secrets they
write, and the result each ends in. Nothing here raises for an expected failure: a
`Stop` carries the result out. State written by tofu (after success, failure or
interruption alike) is saved before the result is decided, because tofu may have
changed real infrastructure."""

from __future__ import annotations

import base64
from dataclasses import replace

import orjson

from controller.core.basics.names import (
    ANN_PLAN_SUMMARY,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_PLAN_OF,
    PLAN_JSON_KEY,
    PLAN_KEY,
    SECRET_SIZE_LIMIT,
    STATE_KEY,
    Op,
)
from controller.core.jobs.job import Outcome
from controller.core.jobs.run_report import ErrorKind, headline
from controller.runner import approved, outputs, plans, verdicts
from controller.runner.op_context import OpContext, Stop, failed, tofu_failed
from controller.runner.result import RunnerResult
from controller.runner.state import StateError, StoredState, contract_reading
from runtime.errors import ApiError
from runtime.jsonobj import Json

PLAN_FILE = "tfplan"
_FLAGS = ("-input=false", "-no-color")


async def _plan(ctx: OpContext, *extra: str) -> tuple[int, bytes, Json]:
    """`tofu plan -out`, then the saved plan as JSON; returns (exit code, JSON bytes, JSON)."""
    ex = await ctx.tofu.run("plan", *_FLAGS, f"-out={PLAN_FILE}", *extra)
    if ex.code not in (0, 2) or (ex.code == 2 and "-detailed-exitcode" not in extra):
        raise Stop(tofu_failed(ctx, "plan", ex))
    shown = await ctx.tofu.run("show", "-json", "-no-color", PLAN_FILE, capture=True)
    if shown.code != 0:
        raise Stop(tofu_failed(ctx, "show", shown))
    try:
        parsed = orjson.loads(shown.stdout)
    except orjson.JSONDecodeError as exc:
        raise Stop(failed(f"tofu show -json printed no JSON: {exc}", ErrorKind.PLAN)) from None
    return ex.code, shown.stdout, parsed


def _summary(plan: Json) -> str:
    changes = plans.changed(plan)
    return "no changes" if not changes else f"{len(changes)} to change: " + ", ".join(changes)


async def _plan_op(ctx: OpContext) -> RunnerResult:
    _, raw, plan = await _plan(ctx)
    changes, report = plans.changes(plan), verdicts.judged(ctx.env, plan)
    denied = verdicts.denied(report)
    if denied is not None:
        # Nothing to approve: the plan is not kept, and no TerraformPlan is made for it.
        return RunnerResult(
            outcome=Outcome.POLICY_DENIED,
            message=f"{denied}; the plan is not kept",
            changes=changes,
            policy=report,
        )
    name = await _keep_plan(ctx, raw, plan)
    if name is None:
        return failed(
            f"the plan is larger than a Secret can hold ({SECRET_SIZE_LIMIT} bytes)", ErrorKind.PLAN
        )
    return RunnerResult(
        outcome=Outcome.SUCCESS,
        message=f"planned: {_summary(plan)}",
        plan_secret=name,
        changes=changes,
        policy=report,
    )


async def _keep_plan(ctx: OpContext, raw: bytes, plan: Json) -> str | None:
    """The plan Secret, written when the Job was given one (a plan; an apply, for the plan
    it stops on): the saved plan, its JSON, and its summary for the TerraformPlan. Its
    name, or None when none was asked for or the plan is larger than a Secret."""
    name = ctx.env.plan_secret
    if name is None:
        return None
    data = {PLAN_KEY: (ctx.work_dir / PLAN_FILE).read_bytes(), PLAN_JSON_KEY: raw}
    if sum(len(v) for v in data.values()) > SECRET_SIZE_LIMIT:
        return None
    await _put_plan_secret(ctx, name, data, plans.summarize(plan).encode())
    return name


async def _put_plan_secret(ctx: OpContext, name: str, data: dict[str, bytes], summary: str) -> None:
    # Owned by this Job: the plan lives exactly as long as the Job that made it, which is
    # what a TerraformPlan is named after. The summary holds addresses and actions only.
    metadata: Json = {
        "name": name,
        "labels": {
            LABEL_PLAN_OF: ctx.env.object_name,
            LABEL_KIND: ctx.env.object_kind,
            LABEL_NAME: ctx.env.object_name,
        }
        | ctx.env.written_labels,
        "annotations": {ANN_PLAN_SUMMARY: summary},
    }
    if ctx.env.job_uid:
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": ctx.env.job_name}
        metadata["ownerReferences"] = [owner | {"uid": ctx.env.job_uid}]
    body: Json = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata}
    body["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
    try:
        await ctx.kube.create_secret(body)
    except ApiError as exc:
        if exc.status != 409:
            raise
        await ctx.kube.replace_secret(name, body)  # a retried Job pod: same name, newer plan


async def _apply(ctx: OpContext, old: StoredState | None) -> RunnerResult:
    """Plans, then checks before anything applies, in this order: the approved plan's
    changes (plan-changed), the policies' Deny rules (policy-denied: even with
    allowDestructive, even approved), the destructive guard and the policies'
    RequireApproval rules (blocked, the plan kept for approval); then applies that plan."""
    _, raw, plan = await _plan(ctx)
    changes = plans.changes(plan)
    text = await approved.unapproved(ctx, plan)
    if text is not None:
        return RunnerResult(
            outcome=Outcome.PLAN_CHANGED,
            message=text,
            state_serial=_serial(old),
            plan_secret=await _keep_plan(ctx, raw, plan),
            changes=changes,
        )
    report = verdicts.judged(ctx.env, plan)
    denied = verdicts.denied(report)
    if denied is not None:
        return RunnerResult(
            outcome=Outcome.POLICY_DENIED,
            message=f"{denied}; nothing was changed",
            state_serial=_serial(old),
            changes=changes,
            policy=report,
        )
    held = verdicts.held(ctx.env, plan, report)
    if held:
        # The plan it stopped on is kept: approving it approves exactly those changes.
        return RunnerResult(
            outcome=Outcome.BLOCKED,
            message="; ".join(held) + "; nothing was changed",
            state_serial=_serial(old),
            plan_secret=await _keep_plan(ctx, raw, plan),
            changes=changes,
            policy=report,
        )
    ex = await ctx.tofu.run("apply", *_FLAGS, "-auto-approve", PLAN_FILE)
    serial = await _save_state(ctx, old, ctx.env.inputs_hash if ex.code == 0 else _hash(old))
    if ex.code != 0:
        return replace(tofu_failed(ctx, "apply", ex, serial), changes=changes, policy=report)
    written = await _write_outputs(ctx, serial) if ctx.env.outputs_secret else None
    return RunnerResult(
        outcome=Outcome.SUCCESS,
        message=f"applied: {_summary(plan)}",
        state_serial=serial,
        outputs=written,
        contract=_reading(ctx),
        changes=changes,
        policy=report,
    )


async def _write_outputs(ctx: OpContext, serial: int | None) -> tuple[str, ...]:
    """The outputs Secret, created or replaced; the names written. A failure here fails
    the Job, so the apply (a no-op by now) runs again and the Secret is written then."""
    name = ctx.env.outputs_secret
    assert name is not None
    shown = await ctx.tofu.run("output", "-json", "-no-color", capture=True)
    if shown.code != 0:
        text = f"applied, but tofu output failed: {shown.stderr}"
        summary = headline(shown.stderr) or "applied, but tofu output failed"
        raise Stop(failed(text, ErrorKind.OUTPUTS, serial, summary=summary))
    try:
        data = outputs.chosen(orjson.loads(shown.stdout or b"{}"), ctx.env.outputs_names)
    except (outputs.OutputsError, orjson.JSONDecodeError) as exc:
        text = f"applied, but outputs Secret {name} not written: {exc}"
        raise Stop(failed(text, ErrorKind.OUTPUTS, serial)) from None
    body = outputs.secret_body(
        name,
        data,
        object_name=ctx.env.object_name,
        object_kind=ctx.env.object_kind,
        object_uid=ctx.env.object_uid,
        labels=ctx.env.written_labels,
    )
    try:
        await ctx.kube.create_secret(body)
    except ApiError as exc:
        if exc.status != 409:
            raise
        await ctx.kube.replace_secret(name, body)
    return tuple(data)


async def _drift(ctx: OpContext) -> RunnerResult:
    code, _, plan = await _plan(ctx, "-detailed-exitcode")
    found = code != 0
    message = f"drift: {_summary(plan)}" if found else "no drift"
    changes = plans.changes(plan)
    # A plan that found no drift read what a refresh would have: its reading (issue 39).
    reading = None if found else _plan_reading(ctx, plan)
    return RunnerResult(
        outcome=Outcome.SUCCESS, message=message, drift=found, changes=changes, contract=reading
    )


def _plan_reading(ctx: OpContext, plan: Json) -> dict[str, object] | None:
    """The contract reading of a plan that found no drift: its outputs as just read from
    the cloud (a plan refreshes every resource and data source first), which is what a
    refresh would have left. A plan with changes has none: what it plans is not what is
    there (issue 39: a drift check answers the machine's health re-read)."""
    outputs = ((plan.get("planned_values") or {}).get("outputs")) or {}
    if not isinstance(outputs, dict):
        return None
    return contract_reading(orjson.dumps({"outputs": outputs}), ctx.env.object_kind)


async def _write_op(
    ctx: OpContext, old: StoredState | None, what: str, flags: tuple[str, ...]
) -> RunnerResult:
    """refresh and destroy: one tofu command that writes state."""
    ex = await ctx.tofu.run(*what.split(), *_FLAGS, *flags)
    # A refreshed state still reflects the inputs last applied; a destroyed one none.
    keep = None if ctx.env.op is Op.DESTROY and ex.code == 0 else _hash(old)
    serial = await _save_state(ctx, old, keep)
    if ex.code != 0:
        return tofu_failed(ctx, what, ex, serial)
    if ctx.env.op is Op.DESTROY:
        # Destroyed: the state and its backups describe nothing any more.
        await ctx.store.remove()
    reading = None if ctx.env.op is Op.DESTROY else _reading(ctx)
    return RunnerResult(
        outcome=Outcome.SUCCESS,
        message=f"tofu {what} succeeded",
        state_serial=serial,
        contract=reading,
    )


def _reading(ctx: OpContext) -> dict[str, object] | None:
    """The contract reading of the state tofu left (None outside the contract): the
    controller refreshes a machine or pool whose apply left outputs pending."""
    path = ctx.work_dir / STATE_KEY
    return contract_reading(path.read_bytes(), ctx.env.object_kind) if path.exists() else None


async def _restore(ctx: OpContext) -> RunnerResult:
    serial = ctx.env.restore_serial
    assert serial is not None  # required by env for op=restore
    try:
        new_serial = await ctx.store.restore(serial)
    except StateError as exc:
        return failed(str(exc), ErrorKind.STATE)
    text = f"restored backup {ctx.store.backup_name(serial)} as state serial {new_serial}"
    return RunnerResult(outcome=Outcome.SUCCESS, message=text, state_serial=new_serial)


def _serial(old: StoredState | None) -> int | None:
    return None if old is None else old.serial


def _hash(old: StoredState | None) -> str | None:
    return None if old is None else old.inputs_hash


async def _save_state(
    ctx: OpContext, old: StoredState | None, inputs_hash: str | None
) -> int | None:
    """Saves the state tofu left in the work directory; returns the stored serial.

    If the Secret cannot be written, the state goes to a rescue Secret and the
    op fails saying where it is: losing it would orphan real infrastructure."""
    path = ctx.work_dir / STATE_KEY
    if not path.exists():
        return _serial(old)
    data = path.read_bytes()
    try:
        return await ctx.store.save(old, data, inputs_hash)
    except (StateError, ApiError) as exc:
        rescue = await _rescue(ctx, data)
        text = f"tofu ran but its state could not be saved ({exc}); {rescue}"
        raise Stop(failed(text, ErrorKind.STATE)) from None


async def _rescue(ctx: OpContext, data: bytes) -> str:
    name = f"{ctx.env.state_secret}-rescue-{ctx.env.job_name}"
    try:
        await ctx.store.rescue(name, data)
    except (ApiError, StateError) as exc:
        return f"the rescue Secret {name} could not be written either ({exc})"
    return f"the new state is in Secret {name}"


async def refresh_steps(ctx: OpContext, old: StoredState | None) -> RunnerResult:
    return await _write_op(ctx, old, "apply -refresh-only", ("-auto-approve",))


async def destroy_steps(ctx: OpContext, old: StoredState | None) -> RunnerResult:
    return await _write_op(ctx, old, "destroy", ("-auto-approve",))


async def plan_steps(ctx: OpContext, old: StoredState | None) -> RunnerResult:
    return await _plan_op(ctx)


async def drift_steps(ctx: OpContext, old: StoredState | None) -> RunnerResult:
    return await _drift(ctx)


async def restore_steps(ctx: OpContext, old: StoredState | None) -> RunnerResult:
    return await _restore(ctx)


async def apply_steps(ctx: OpContext, old: StoredState | None) -> RunnerResult:
    return await _apply(ctx, old)
