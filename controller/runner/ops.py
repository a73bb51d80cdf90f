"""One Job's operation: the runner contract carried out with tofu. RUNNER_OPS is the one
table of the runner's steps per op: whether it first renders the inputs and the state
and runs `tofu init` (`_prepare`), and the steps that end in its result
(controller/runner/op_steps.py). A new op is a row here and a row in the core's table
of operations (controller/core/basics/ops.py); tests/unit/core/basics/test_ops_table.py
fails while either is missing.

Every op ends in a `RunnerResult`; nothing here raises for an expected failure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    STATE_KEY,
    Op,
    labelled_for,
)
from controller.core.jobs.run_report import ErrorKind
from controller.runner import op_steps
from controller.runner.env import RunnerEnv
from controller.runner.kube import (
    Kube,
)
from controller.runner.op_context import OpContext, Stop, Tofu, failed, tofu_failed
from controller.runner.result import RunnerResult
from controller.runner.state import StateError, StateStore, StoredState
from controller.runner.workdir import ImageRenderError, RenderError, render

_FLAGS = ("-input=false", "-no-color")


@dataclass(frozen=True)
class RunnerOp:
    """The runner's steps of one op: whether it first renders the inputs and the state
    into the work directory and runs `tofu init` (`_prepare`), then its own steps, which
    end in its result."""

    prepares: bool
    steps: Callable[[OpContext, StoredState | None], Awaitable[RunnerResult]]


# One row per op (the core's table of operations is controller/core/basics/ops.py;
# tests/unit/core/basics/test_ops_table.py holds the two to the same ops).
RUNNER_OPS: Final[Mapping[Op, RunnerOp]] = {
    Op.PLAN: RunnerOp(True, op_steps.plan_steps),
    Op.APPLY: RunnerOp(True, op_steps.apply_steps),
    Op.DRIFT: RunnerOp(True, op_steps.drift_steps),
    Op.REFRESH: RunnerOp(True, op_steps.refresh_steps),
    Op.DESTROY: RunnerOp(True, op_steps.destroy_steps),
    Op.RESTORE: RunnerOp(False, op_steps.restore_steps),  # copies a backup: no module, no init
}


async def execute(env: RunnerEnv, kube: Kube, tofu: Tofu, work_dir: Path) -> RunnerResult:
    store = StateStore(
        kube,
        secret_name=env.state_secret,
        object_name=env.object_name,
        object_kind=env.object_kind,
        labels=env.written_labels,
        writer=env.job_name,
    )
    ctx = OpContext(env, kube, tofu, work_dir, store)
    row = RUNNER_OPS[env.op]
    try:
        old = await _prepare(ctx) if row.prepares else None
        return await row.steps(ctx, old)
    except Stop as stop:
        return stop.result


async def _prepare(ctx: OpContext) -> StoredState | None:
    """Renders inputs and state into the work directory and runs `tofu init`."""
    env = ctx.env
    inputs = await ctx.kube.get_secret(env.inputs_secret)
    if inputs is None:
        raise Stop(failed(f"inputs Secret {env.inputs_secret} not found", ErrorKind.INPUTS))
    if not labelled_for(inputs, env.object_kind, env.object_name):
        who = f"{env.object_kind}/{env.object_name}"
        text = f"inputs Secret {env.inputs_secret} is not labelled as {who}'s"
        raise Stop(failed(text, ErrorKind.INPUTS))
    recorded = ((inputs.get("metadata") or {}).get("annotations") or {}).get(ANN_INPUTS_HASH)
    if recorded != env.inputs_hash:
        text = f"inputs Secret {env.inputs_secret} holds inputs {recorded}, not {env.inputs_hash}"
        raise Stop(failed(text, ErrorKind.INPUTS))
    try:
        render(
            ctx.work_dir,
            inputs,
            kind=env.object_kind,
            secret_variables=env.secret_variables,
            image_dir=env.module_image_dir,
        )
    except ImageRenderError as exc:
        raise Stop(failed(str(exc), ErrorKind.IMAGE_LAYOUT)) from None
    except RenderError as exc:
        raise Stop(failed(str(exc), ErrorKind.INPUTS)) from None
    try:
        old = await ctx.store.load()
    except StateError as exc:
        raise Stop(failed(str(exc), ErrorKind.STATE)) from None
    if old is not None:
        (ctx.work_dir / STATE_KEY).write_bytes(old.data)
    ex = await ctx.tofu.run("init", *_FLAGS)
    if ex.code != 0:
        raise Stop(tofu_failed(ctx, "init", ex))
    return old
