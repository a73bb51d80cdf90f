"""The operator's settings: the flags that shape every decision and plan of a process.

One of the three inputs of a pass, beside the Snapshot (what the cluster shows) and
the Facts (this process's memory and live reads). Settings never change while the
process runs, and are built once, by `settings_of`, which `captf run` and
`captf decide` both call: a decision printed by `captf decide` is the controller's
under the same flags."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from controller.core.admission import env, security
from controller.core.admission.refusal import Refusal, refusals_message
from controller.core.leases.budget import (
    DEFAULT_PER_MINUTE,
    DEFAULT_SHARE,
    check_per_minute,
    check_share,
)
from controller.core.spec.image import DEFAULT_SIZE_LIMIT
from controller.core.spec.jobpod import PodPolicyError, check_defaults
from controller.core.spec.module_mount import AUTO, VOLUME, mount_of
from controller.core.spec.policy import OPEN, RunnerPolicy, runner_policy
from controller.core.spec.sharding import selector_keys

# Where the run-slot Leases live when nothing names the controller's namespace.
DEFAULT_SLOT_NAMESPACE = "default"


@dataclass(frozen=True)
class Settings:
    max_concurrent_runs: int = 10  # --max-concurrent-runs: the run-slot Leases
    slot_namespace: str = DEFAULT_SLOT_NAMESPACE  # where the run slots live
    # --max-concurrent-runs-per-cluster: slots one cluster's Jobs may hold; 0: no cap.
    max_runs_per_cluster: int = 0
    # --background-run-share: of the run slots, what background Jobs (drift checks,
    # re-reads) may hold at once; --background-jobs-per-minute: the background Jobs an
    # identity without spec.backgroundJobsPerMinute may start a minute
    # (controller/core/leases/budget.py).
    background_run_share: float = DEFAULT_SHARE
    background_jobs_per_minute: int = DEFAULT_PER_MINUTE
    # --allowed-images, --allowed-service-accounts; without flags nothing is restricted.
    runner: RunnerPolicy = OPEN
    # The keys of --watch-label-selector: an object's labels of these keys go onto its
    # Jobs and the Secrets written for it (controller/core/spec/sharding.py).
    shard_keys: tuple[str, ...] = ()
    # --kept-plans: finished TerraformPlans kept per object (controller/core/plan/plan_objects.py).
    kept_plans: int = 3
    # --cannot-start-grace: seconds a Job that cannot start (FailedCreate, an image pull
    # failure) is reported before it is ended as a failure (controller/core/jobs/starting.py).
    cannot_start_grace: float = 60.0
    # --max-module-image-size: bytes of compressed layers a module image may have.
    image_size_limit: int = DEFAULT_SIZE_LIMIT
    # How a Job's pod gets a module image, `volume` or `copy`: --module-image-mount, with
    # `auto` resolved from the API server's answers when the controller starts to lead.
    module_image_mount: str = VOLUME


class Flags(Protocol):
    """The flags `captf run` and `captf decide` share (argparse attribute names)."""

    @property
    def max_concurrent_runs(self) -> int: ...

    @property
    def allowed_images(self) -> str: ...

    @property
    def allowed_service_accounts(self) -> str: ...


def settings_of(
    flags: Flags,
    *,
    slot_namespace: str = DEFAULT_SLOT_NAMESPACE,
    watch_label_selector: str | None = None,
    server_version: tuple[int, int] | None = None,
    image_volumes: bool | None = None,
) -> Settings:
    """The settings from the shared flags, and from the two only `captf run` has;
    `image_volumes` (whether the API server kept a dry-run Job's image volume), else
    `server_version`, decides `--module-image-mount=auto` (both unknown: the copy shape)."""
    return Settings(
        max_concurrent_runs=flags.max_concurrent_runs,
        slot_namespace=slot_namespace,
        runner=runner_policy(flags),
        shard_keys=selector_keys(watch_label_selector),
        cannot_start_grace=float(getattr(flags, "cannot_start_grace", 60.0)),
        image_size_limit=int(getattr(flags, "max_module_image_size", DEFAULT_SIZE_LIMIT)),
        module_image_mount=mount_of(
            str(getattr(flags, "module_image_mount", AUTO)), server_version, image_volumes
        ),
        max_runs_per_cluster=int(getattr(flags, "max_concurrent_runs_per_cluster", 0)),
        background_run_share=check_share(
            float(getattr(flags, "background_run_share", DEFAULT_SHARE))
        ),
        background_jobs_per_minute=check_per_minute(
            int(getattr(flags, "background_jobs_per_minute", DEFAULT_PER_MINUTE)),
            "--background-jobs-per-minute",
        ),
    )


class JobDefaultsError(ValueError):
    """`--job-defaults` is not a JSON object of valid policy fields; the message says why."""


def job_defaults(text: str) -> dict[str, Any]:
    """`--job-defaults`: a JSON object holding any of spec.jobs's pod policy fields, for
    every object whose own and whose cluster's leave them unset. Held to the rules an
    object is: the right shapes, no weakened security context, no reserved env name."""
    if not text.strip():
        return {}
    try:
        defaults = json.loads(text)
    except ValueError as err:
        raise JobDefaultsError(f"--job-defaults is not JSON: {err}") from None
    if not isinstance(defaults, dict):
        raise JobDefaultsError("--job-defaults must be a JSON object")
    try:
        check_defaults(defaults)
    except PodPolicyError as err:
        raise JobDefaultsError(str(err)) from None
    spec, flag = {"jobs": defaults}, "--job-defaults"
    refused = [
        Refusal(flag + refusal.field.removeprefix(".jobs"), refusal.rule)
        for refusal in [*security.refusals(spec, ""), *env.refusals(spec, "")]
    ]
    if refused:
        raise JobDefaultsError(refusals_message(refused))
    return dict(defaults)
