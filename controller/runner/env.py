"""The runner's instructions: the environment the controller's Job builder sets.

This is the contract between the controller and any runner image; the names are
controller/core/basics/runner_vars.py's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.basics.names import MANAGED_BY, Op
from controller.core.basics.ops import traits
from controller.core.basics.runner_vars import RunnerVar
from controller.core.jobs.termination import TERMINATION_MESSAGE_PATH
from controller.core.spec.sharding import parse_labels


class EnvError(ValueError):
    """A required variable is missing or malformed: the Job was built wrong."""


@dataclass(frozen=True, kw_only=True)
class RunnerEnv:
    op: Op
    namespace: str
    job_name: str  # the runner's own Job
    object_name: str
    object_kind: str
    inputs_secret: str  # `<name>-inputs-<hash8>`: module.<file> keys and variables.json
    inputs_hash: str  # must equal the inputs Secret's captf.io/inputs-hash
    state_secret: str  # `<name>-state`; backups are `<state_secret>-<serial>`
    guarded: bool  # a plan that deletes or replaces anything ends `blocked`
    # op=plan: where the plan goes; op=apply: where the plan goes when the apply stops on
    # it (blocked by the guard, or changed since approval), for a person to approve.
    plan_secret: str | None
    approved_plan_secret: str | None  # op=apply of an approved plan: that plan
    # op=apply of an approved plan: the fingerprint the approver saw; the fresh plan's
    # changes must have it (the plan Secret alone could have been rewritten since).
    approved_fingerprint: str | None = None
    restore_serial: int | None  # op=restore: the backup to bring back
    tofu: str  # the tofu binary (a path, or a name on PATH)
    tofu_cli_config: str | None  # TF_CLI_CONFIG_FILE for tofu: the provider mirror
    work_dir: str | None  # parent of the per-run work directory (default: the temp dir)
    credentials_secret: str | None = None  # its values are redacted from what the runner writes
    secret_variables: tuple[str, ...] = ()  # variables from Secrets: redacted likewise
    # op=apply with spec.outputs: the Secret the outputs go to after a success, the
    # outputs to write (None: all), and the object's uid for the Secret's owner.
    outputs_secret: str | None = None
    outputs_names: tuple[str, ...] | None = None
    object_uid: str | None = None
    # The object's shard labels (RunnerVar.SHARD_LABELS), put on every Secret written.
    shard_labels: Mapping[str, str] = field(default_factory=dict)
    job_uid: str | None = None  # the plan Secret's owner; None: the Secret is not owned
    # The container's termination message file: the result goes there, and only there.
    result_file: str = TERMINATION_MESSAGE_PATH
    # Where the pod mounts the module image of an image source; None: no image mounted.
    module_image_dir: str | None = None
    # op=apply and op=plan: the policy set to judge the plan with, as the controller
    # wrote it; None: no policy selects the object.
    policies: str | None = None

    @property
    def written_labels(self) -> dict[str, str]:
        """The labels of every Secret the runner writes, besides its own kind's."""
        return {**self.shard_labels, **MANAGED_BY}


def _required(env: Mapping[str, str], key: RunnerVar) -> str:
    value = env.get(key, "")
    if not value:
        raise EnvError(f"{key} is not set")
    return value


def _optional(env: Mapping[str, str], key: RunnerVar) -> str | None:
    return env.get(key) or None


def from_environ(env: Mapping[str, str]) -> RunnerEnv:
    """Parses and checks the environment; raises EnvError naming the first problem."""
    var = RunnerVar
    raw_op = _required(env, var.OP)
    try:
        op = Op(raw_op)
    except ValueError:
        raise EnvError(f"{var.OP}={raw_op!r} is not one of {[o.value for o in Op]}") from None
    restore_serial = None
    if op is Op.RESTORE:
        raw = _required(env, var.RESTORE_SERIAL)
        if not raw.isdigit():
            raise EnvError(f"{var.RESTORE_SERIAL}={raw!r} is not a non-negative integer")
        restore_serial = int(raw)
    row = traits(op)
    # A plan's result is its plan Secret; an apply keeps one only when it stops on a plan.
    plan_secret = None
    if row.keeps_plan:
        plan_secret = (_required if row.result_is_plan else _optional)(env, var.PLAN_SECRET)
    return RunnerEnv(
        op=op,
        namespace=_required(env, var.NAMESPACE),
        job_name=_required(env, var.JOB_NAME),
        object_name=_required(env, var.OBJECT_NAME),
        object_kind=_required(env, var.OBJECT_KIND),
        # A restore runs no module, so it needs no inputs.
        inputs_secret=_required(env, var.INPUTS_SECRET) if row.runs_module else "",
        inputs_hash=_required(env, var.INPUTS_HASH) if row.runs_module else "",
        state_secret=_required(env, var.STATE_SECRET),
        guarded=env.get(var.GUARDED, "").lower() == "true",
        plan_secret=plan_secret,
        approved_plan_secret=_optional(env, var.APPROVED_PLAN_SECRET) if op is Op.APPLY else None,
        approved_fingerprint=_optional(env, var.APPROVED_FINGERPRINT) if op is Op.APPLY else None,
        restore_serial=restore_serial,
        tofu=env.get(var.TOFU) or "tofu",
        tofu_cli_config=_optional(env, var.TOFU_CLI_CONFIG),
        work_dir=_optional(env, var.WORK_DIR),
        credentials_secret=_optional(env, var.CREDENTIALS_SECRET),
        secret_variables=tuple(n for n in env.get(var.SECRET_VARIABLES, "").split(",") if n),
        outputs_secret=_optional(env, var.OUTPUTS_SECRET) if op is Op.APPLY else None,
        outputs_names=_names(env.get(var.OUTPUTS_NAMES)),
        object_uid=_optional(env, var.OBJECT_UID),
        shard_labels=parse_labels(env.get(var.SHARD_LABELS)),
        job_uid=_optional(env, var.JOB_UID),
        result_file=env.get(var.RESULT_FILE) or TERMINATION_MESSAGE_PATH,
        module_image_dir=_optional(env, var.MODULE_IMAGE_DIR),
        policies=_optional(env, var.POLICIES) if op in (Op.APPLY, Op.PLAN) else None,
    )


def _names(raw: str | None) -> tuple[str, ...] | None:
    """RunnerVar.OUTPUTS_NAMES: absent means every output; set (even empty) lists them."""
    return None if raw is None else tuple(n for n in raw.split(",") if n)
