"""The pure decision core: functions of a snapshot and the time, nothing else.

This is its face: what io (the reconciler, the caches, the janitor) needs, and
nothing more. The rooms behind it, bottom to top, each importing only the ones
below (an import-linter contract holds them to it):

- basics: CAPTF's API names, Kubernetes time formats, serials, redaction, the
  runner contract's variables (io imports these directly: they are vocabulary);
- spec: an object's spec as read (policy, windows, inputs, references, Ready);
- jobs: one Job, the history of an object's Jobs, backoff, retention, naming, the
  result read from a termination message;
- leases: Lease writes as data, the family exclusion, run slots, stale holds;
- decide: the snapshot, Settings and Facts, the context, DecideOp's steps;
- plan: the plan of one pass (accounting, the launch, pruning, the status).
"""

from controller.core.decide.facts import Facts, Refusal
from controller.core.decide.settings import Settings, settings_of
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import result
from controller.core.jobs.job_env import READ as RUNNER_VARS_READ
from controller.core.jobs.job_env import containers, job_env
from controller.core.jobs.termination import (
    JOB_UID_LABEL,
    Recorded,
    message_of,
    needs_result,
    result_of,
    with_result,
)
from controller.core.leases import family
from controller.core.leases.family import Busy, holder_of, member_jobs
from controller.core.leases.stale import STALE_AFTER, holder_namespace, needs_entry, stale_leases
from controller.core.leases.writes import LEASE_API, LeaseWrite, Role, change_of
from controller.core.plan.accounting import Accounting, Event, Sample
from controller.core.plan.interrupted import Record
from controller.core.plan.launching import Launch
from controller.core.plan.planner import Plan, live_check_needed
from controller.core.plan.planner import plan as plan_pass
from controller.core.spec.image import (
    DEFAULT_SIZE_LIMIT,
    IMAGE_NOT_FOUND,
    REGISTRY_UNAUTHORIZED,
    REGISTRY_UNAVAILABLE,
    ROLE_LABEL,
    ImageFact,
    ImageLookup,
    Resolved,
    Unresolved,
    reference_digest,
    repository_of,
)
from controller.core.spec.policy import DEFAULT_IMAGES, DEFAULT_SERVICE_ACCOUNTS
from controller.core.spec.ready import ready_of
from controller.core.spec.refs import (
    CONFIGMAP,
    SECRET,
    ObjectRef,
    bootstrap_secret_of,
    capi_cluster_ref,
    cluster_name_of,
    configmaps_read,
    dependencies,
    infrastructure_cluster_of,
    infrastructure_ref,
    module_image,
    owner_of,
    secrets_read,
    spec_of,
    terraform_cluster_of,
)

__all__ = [
    "CONFIGMAP",
    "DEFAULT_IMAGES",
    "DEFAULT_SERVICE_ACCOUNTS",
    "DEFAULT_SIZE_LIMIT",
    "IMAGE_NOT_FOUND",
    "JOB_UID_LABEL",
    "LEASE_API",
    "REGISTRY_UNAUTHORIZED",
    "REGISTRY_UNAVAILABLE",
    "ROLE_LABEL",
    "RUNNER_VARS_READ",
    "SECRET",
    "STALE_AFTER",
    "Accounting",
    "Busy",
    "Event",
    "Facts",
    "ImageFact",
    "ImageLookup",
    "Launch",
    "LeaseWrite",
    "ObjectRef",
    "Plan",
    "Record",
    "Recorded",
    "Refusal",
    "Resolved",
    "Role",
    "Sample",
    "Settings",
    "Snapshot",
    "Unresolved",
    "bootstrap_secret_of",
    "capi_cluster_ref",
    "change_of",
    "cluster_name_of",
    "configmaps_read",
    "containers",
    "dependencies",
    "family",
    "holder_namespace",
    "holder_of",
    "infrastructure_cluster_of",
    "infrastructure_ref",
    "job_env",
    "live_check_needed",
    "member_jobs",
    "message_of",
    "module_image",
    "needs_entry",
    "needs_result",
    "owner_of",
    "plan_pass",
    "ready_of",
    "reference_digest",
    "repository_of",
    "result",
    "result_of",
    "secrets_read",
    "settings_of",
    "spec_of",
    "stale_leases",
    "terraform_cluster_of",
    "with_result",
]
