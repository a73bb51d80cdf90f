"""The runner contract's environment: every variable a runner Job is given.

The controller writes them (controller/core/plan/jobspec.py builds the Job, the shard
labels are added by controller/core/spec/sharding.py), the runner reads them
(controller/runner/env.py), and the controller reads a few back from its Jobs
(controller/core/jobs/job_env.py). A runner image built for another release reads the
same names, so renaming one is a breaking change."""

from __future__ import annotations

from enum import StrEnum


class RunnerVar(StrEnum):
    """One variable of the runner's environment. A member is its name as a string; a Job
    body carries `.value`, a plain str, so any serializer writes it."""

    OP = "CAPTF_OP"
    NAMESPACE = "CAPTF_NAMESPACE"
    JOB_NAME = "CAPTF_JOB_NAME"  # the runner's own Job
    # Its uid, from the pod's label (downward API): the plan Secret's owner. The runner
    # may not read Jobs, so it learns the uid from its pod, never from the Job.
    JOB_UID = "CAPTF_JOB_UID"
    # Where the runner writes its result: its container's terminationMessagePath.
    RESULT_FILE = "CAPTF_RESULT_FILE"
    OBJECT_NAME = "CAPTF_OBJECT_NAME"
    OBJECT_KIND = "CAPTF_OBJECT_KIND"
    OBJECT_UID = "CAPTF_OBJECT_UID"  # op=apply with outputs: the outputs Secret's owner
    INPUTS_SECRET = "CAPTF_INPUTS_SECRET"
    INPUTS_HASH = "CAPTF_INPUTS_HASH"
    STATE_SECRET = "CAPTF_STATE_SECRET"
    GUARDED = "CAPTF_GUARDED"  # "true": a plan that deletes or replaces anything is blocked
    WORK_DIR = "CAPTF_WORK_DIR"
    PLAN_SECRET = "CAPTF_PLAN_SECRET"  # op=plan; op=apply: the plan it stops on
    APPROVED_PLAN_SECRET = "CAPTF_APPROVED_PLAN_SECRET"  # op=apply of an approved plan
    # op=apply of an approved plan: the fingerprint its TerraformPlan showed the approver;
    # the fresh plan must have it, whatever the plan Secret holds by then.
    APPROVED_FINGERPRINT = "CAPTF_APPROVED_FINGERPRINT"
    RESTORE_SERIAL = "CAPTF_RESTORE_SERIAL"  # op=restore
    # op=apply and op=plan: the policy set to judge the plan with (its JSON,
    # controller/core/spec/plan_policies.py); absent: no policy selects the object.
    POLICIES = "CAPTF_POLICIES"
    OUTPUTS_SECRET = "CAPTF_OUTPUTS_SECRET"  # op=apply with spec.outputs
    OUTPUTS_NAMES = "CAPTF_OUTPUTS_NAMES"  # absent: every output; set, even empty: these
    # Names only, never values: the runner reads the values itself, to redact them.
    CREDENTIALS_SECRET = "CAPTF_CREDENTIALS_SECRET"
    # Where that Secret's keys are files (one per key), for a module's providers that
    # read credentials from a file; the runner itself does not read it.
    CREDENTIALS_DIR = "CAPTF_CREDENTIALS_DIR"
    SECRET_VARIABLES = "CAPTF_SECRET_VARIABLES"
    SHARD_LABELS = "CAPTF_SHARD_LABELS"  # put on every Secret the runner writes
    # With a module image source: the image's /captf as the Job mounts it (the module at
    # <dir>/module, OpenTofu at <dir>/runtime, a provider mirror at <dir>/providers).
    MODULE_IMAGE_DIR = "CAPTF_MODULE_IMAGE_DIR"
    # Where the runner finds tofu: set by the runner image (or a process node), not by
    # the controller's Job.
    TOFU = "CAPTF_TOFU"
    TOFU_CLI_CONFIG = "CAPTF_TOFU_CLI_CONFIG"
    # The static copier the runner image carries for the copy shape of a module image
    # Job (controller/runner/copier.py): set by the image (or a process node).
    COPIER = "CAPTF_COPIER"
