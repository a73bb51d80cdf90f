"""The core's face: what io (the reconciler, the caches, the janitor) needs of the
rooms, and nothing more: every name here is used by io (two of them, `RunnerFacts` and
`runner_rbac`, by the CLI's live read too); the other rooms (the CLI, the dev tools, the
runner) import the core's rooms themselves. A name no room outside the core uses is not
here. `controller.core` gives these names, importing this module on
the first one asked for (controller/core/__init__.py), so a process that needs only a
room (the runner: basics and jobs) does not load the planner."""

from controller.core.admission.approval import approval
from controller.core.admission.checks import spec_refusals, update_refusals
from controller.core.admission.identity import SecretAccess, secret_to_review
from controller.core.admission.kinds import ADMISSION_KINDS, inputs_spec
from controller.core.admission.refusal import refusals_message
from controller.core.contract.capacity import LABEL_CAPACITY, LABEL_NODE_INFO
from controller.core.conversion.convert import ConversionFailed, convert
from controller.core.conversion.storage import rewrites_through_status, stale_versions, trimmed
from controller.core.decide import runner_rbac
from controller.core.decide.facts import Facts, Refusal
from controller.core.decide.pinning import IMAGE_WAITS
from controller.core.decide.reads import (
    How,
    capi_read,
    capi_wanted,
    captf_wanted,
    configmaps_wanted,
    is_member,
    owns_secret,
    secrets_wanted,
    state_parts_wanted,
)
from controller.core.decide.remediation import OwnerMark
from controller.core.decide.runner_rbac import RunnerFacts
from controller.core.decide.settings import Settings, settings_of
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import TERMINAL_CONDITIONS, Outcome, finished_at, is_finished, result
from controller.core.jobs.job_env import RUNNER_VARS_READ, containers
from controller.core.jobs.starting import pull_failure
from controller.core.jobs.termination import (
    JOB_UID_LABEL,
    Recorded,
    message_of,
    needs_result,
    result_of,
    with_result,
)
from controller.core.leases import budget_lease, family
from controller.core.leases.budget_demand import stretches
from controller.core.leases.family import Busy, holder_of, member_jobs
from controller.core.leases.slots import is_run_slot
from controller.core.leases.stale import (
    STALE_AFTER,
    holder_namespace,
    needs_entry,
    stale_leases,
    unwatched,
)
from controller.core.leases.writes import LEASE_API, LeaseWrite, Role, change_of
from controller.core.plan.accounting import Accounting, Event, Sample
from controller.core.plan.identities import IdentityPass, SourceSecret, identity_pass
from controller.core.plan.interrupted import Record
from controller.core.plan.launching import Launch
from controller.core.plan.plan_objects import PlanWrites
from controller.core.plan.planner import Plan, live_check_needed, plan_pass
from controller.core.plan.state_moves import Move, MoveStep, state_moves
from controller.core.plan.templates import TemplatePass, template_lookup, template_pass
from controller.core.spec.identity import (
    NO_IDENTITY,
    IdentityRef,
    IdentityView,
    identity_in_use,
    identity_ref_of,
    own_identity_ref,
    secret_ref_of,
)
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
)
from controller.core.spec.module_mount import AUTO as MOUNT_AUTO
from controller.core.spec.module_mount import version_of
from controller.core.spec.policy import DEFAULT_IMAGES, DEFAULT_SERVICE_ACCOUNTS
from controller.core.spec.ready import ready_of
from controller.core.spec.refs import (
    CONFIGMAP,
    SECRET,
    ObjectRef,
    bootstrap_secret_of,
    cluster_name_of,
    configmaps_read,
    dependencies,
    module_image,
    owner_of,
    secrets_read,
    spec_of,
    terraform_cluster_of,
)

__all__ = [
    "ADMISSION_KINDS",
    "CONFIGMAP",
    "DEFAULT_IMAGES",
    "DEFAULT_SERVICE_ACCOUNTS",
    "DEFAULT_SIZE_LIMIT",
    "IMAGE_NOT_FOUND",
    "IMAGE_WAITS",
    "JOB_UID_LABEL",
    "LABEL_CAPACITY",
    "LABEL_NODE_INFO",
    "LEASE_API",
    "MOUNT_AUTO",
    "NO_IDENTITY",
    "REGISTRY_UNAUTHORIZED",
    "REGISTRY_UNAVAILABLE",
    "ROLE_LABEL",
    "RUNNER_VARS_READ",
    "SECRET",
    "STALE_AFTER",
    "TERMINAL_CONDITIONS",
    "Accounting",
    "Busy",
    "ConversionFailed",
    "Event",
    "Facts",
    "How",
    "IdentityPass",
    "IdentityRef",
    "IdentityView",
    "ImageFact",
    "ImageLookup",
    "Launch",
    "LeaseWrite",
    "Move",
    "MoveStep",
    "ObjectRef",
    "Outcome",
    "OwnerMark",
    "Plan",
    "PlanWrites",
    "Record",
    "Recorded",
    "Refusal",
    "Resolved",
    "Role",
    "RunnerFacts",
    "Sample",
    "SecretAccess",
    "Settings",
    "Snapshot",
    "SourceSecret",
    "TemplatePass",
    "Unresolved",
    "approval",
    "bootstrap_secret_of",
    "budget_lease",
    "capi_read",
    "capi_wanted",
    "captf_wanted",
    "change_of",
    "cluster_name_of",
    "configmaps_read",
    "configmaps_wanted",
    "containers",
    "convert",
    "dependencies",
    "family",
    "finished_at",
    "holder_namespace",
    "holder_of",
    "identity_in_use",
    "identity_pass",
    "identity_ref_of",
    "inputs_spec",
    "is_finished",
    "is_member",
    "is_run_slot",
    "live_check_needed",
    "member_jobs",
    "message_of",
    "module_image",
    "needs_entry",
    "needs_result",
    "own_identity_ref",
    "owner_of",
    "owns_secret",
    "plan_pass",
    "pull_failure",
    "ready_of",
    "reference_digest",
    "refusals_message",
    "result",
    "result_of",
    "rewrites_through_status",
    "runner_rbac",
    "secret_ref_of",
    "secret_to_review",
    "secrets_read",
    "secrets_wanted",
    "settings_of",
    "spec_of",
    "spec_refusals",
    "stale_leases",
    "stale_versions",
    "state_moves",
    "state_parts_wanted",
    "stretches",
    "template_lookup",
    "template_pass",
    "terraform_cluster_of",
    "trimmed",
    "unwatched",
    "update_refusals",
    "version_of",
    "with_result",
]
