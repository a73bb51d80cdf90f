"""Names that are part of CAPTF's API: kinds, labels, annotations, ops and reasons.

Every string here is read or written by operators and other tools (kubectl
selectors, alerts), so changing one is a breaking change.

Longer than 400 lines on purpose: it is the vocabulary, one table read from top to
bottom, and a name split into a second home is a name that can be defined twice."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

GROUP: Final = "infrastructure.cluster.x-k8s.io"
# The storage version: what the controller reads and writes, and what the API server keeps.
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
# Still served, and converted to VERSION and back by the controller's conversion webhook
# (controller/core/conversion); objects stored in it are rewritten by the controller.
OLD_VERSION: Final = "v1alpha1"
OLD_API_VERSION: Final = f"{GROUP}/{OLD_VERSION}"
# On an object read as VERSION: what its OLD_VERSION form held that VERSION has no field
# for, so that reading it as OLD_VERSION again gives it back (Cluster API's providers keep
# theirs in cluster.x-k8s.io/conversion-data). Never written as OLD_VERSION.
ANN_CONVERSION_DATA: Final = "captf.io/conversion-data"

CLUSTER: Final = "TerraformCluster"
POOL: Final = "TerraformMachinePool"
MACHINE: Final = "TerraformMachine"
KINDS: Final = (CLUSTER, POOL, MACHINE)
# A plan that waits for a person, owned by its target (one of KINDS): approving is setting
# its spec.approved (docs/security.md, "Approvals").
PLAN_KIND: Final = "TerraformPlan"
PLAN_PLURAL: Final = "terraformplans"
PLURALS: Final = {
    CLUSTER: "terraformclusters",
    POOL: "terraformmachinepools",
    MACHINE: "terraformmachines",
}
# The templates whose status tells the autoscaler the node they would make (scale from
# zero: controller/core/plan/templates.py). They run nothing.
MACHINE_TEMPLATE: Final = "TerraformMachineTemplate"
POOL_TEMPLATE: Final = "TerraformMachinePoolTemplate"
TEMPLATE_PLURALS: Final = {
    MACHINE_TEMPLATE: "terraformmachinetemplates",
    POOL_TEMPLATE: "terraformmachinepooltemplates",
}
# Kinds whose module and variables may change after create.
MUTABLE_KINDS: Final = frozenset({CLUSTER, POOL})

FINALIZER: Final = "captf.io/destroy"

# Cluster API (contract v1beta2): the objects CAPTF's kinds act for. A TerraformCluster
# acts for the Cluster that owns it; a machine or pool for its owner Machine or
# MachinePool and, by the cluster-name label, that owner's Cluster.
CAPI_GROUP: Final = "cluster.x-k8s.io"
CAPI_VERSION: Final = "v1beta2"
CAPI_API_VERSION: Final = f"{CAPI_GROUP}/{CAPI_VERSION}"
CAPI_CLUSTER: Final = "Cluster"
CAPI_MACHINE: Final = "Machine"
CAPI_POOL: Final = "MachinePool"
CAPI_KINDS: Final = (CAPI_CLUSTER, CAPI_MACHINE, CAPI_POOL)
CAPI_PLURALS: Final = {
    CAPI_CLUSTER: "clusters",
    CAPI_MACHINE: "machines",
    CAPI_POOL: "machinepools",
}
# The owner kind each CAPTF kind acts for.
OWNER_KINDS: Final = {CLUSTER: CAPI_CLUSTER, MACHINE: CAPI_MACHINE, POOL: CAPI_POOL}
# On a Machine, MachinePool and their infrastructure: the Cluster they belong to.
LABEL_CLUSTER_NAME: Final = "cluster.x-k8s.io/cluster-name"
# On any object of a Cluster: do not reconcile it (the Cluster's spec.paused does the same
# for all of them).
ANN_PAUSED: Final = "cluster.x-k8s.io/paused"
# On an InfraCluster: its infrastructure is managed by someone else; leave it alone.
ANN_EXTERNALLY_MANAGED: Final = "cluster.x-k8s.io/managed-by"
# clusterctl move: set on each source object before it is deleted; such a deletion is a
# move, never a destroy.
ANN_DELETE_FOR_MOVE: Final = "clusterctl.cluster.x-k8s.io/delete-for-move"
# clusterctl move waits while an object carries it: CAPTF sets it while a Job runs.
ANN_BLOCK_MOVE: Final = "clusterctl.cluster.x-k8s.io/block-move"

# Labels on Jobs (and the retry-capped label on CAPTF objects).
LABEL_KIND: Final = "captf.io/kind"
LABEL_NAME: Final = "captf.io/name"
LABEL_UID: Final = "captf.io/uid"
LABEL_OP: Final = "captf.io/op"
LABEL_RETRY_CAPPED: Final = "captf.io/retry-capped"
LABEL_CLUSTER: Final = "captf.io/cluster"
LABEL_SCOPE: Final = "captf.io/scope"

# Annotations on Jobs.
ANN_RESULT: Final = "captf.io/result"
ANN_DRIFT_REMEDIATION: Final = "captf.io/drift-remediation"
ANN_GUARDED: Final = "captf.io/guarded"
ANN_RETRY: Final = "captf.io/retry"
ANN_RESTORE_SERIAL: Final = "captf.io/restore-serial"
ANN_SEQ: Final = "captf.io/seq"
ANN_ACCOUNTED: Final = "captf.io/accounted"
ANN_INPUTS_HASH: Final = "captf.io/inputs-hash"
# The plan Job whose plan an approved apply carries out (Manual mode).
ANN_PLAN_JOB: Final = "captf.io/plan-job"
# On a Job of a module image: the reference as the spec named it, and the digest its
# volume names; status.image reads them (the controller's Job cache keeps no pod spec).
ANN_MODULE_IMAGE: Final = "captf.io/module-image"
ANN_MODULE_IMAGE_DIGEST: Final = "captf.io/module-image-digest"
# How the Job's pod had the module image: `volume` or `copy` (controller/core/plan/module_mount.py).
ANN_MODULE_IMAGE_MOUNT: Final = "captf.io/module-image-mount"

# Annotations on CAPTF objects.
# (captf.io/approve, the approval before TerraformPlan, is ignored where it is still found.)
# ANN_RESTORE_SERIAL is also the object's restore request.
# Ends a held deletion, or a failing destroy, without a destroy: its value must be the
# object's metadata.uid, so that it cannot be copied onto another object by accident.
ANN_ABANDON: Final = "captf.io/abandon"

# Annotations on Secrets.
ANN_SERIAL: Final = "captf.io/serial"
# On a state Secret (and the backup made of it): what wrote it, a Job's name or
# `captf state push` (`captf state list` shows it).
ANN_WRITTEN_BY: Final = "captf.io/written-by"
# The key of the state (and of each backup) in its Secret, as written before the state
# was laid out across Secrets; now the key of the manifest that names its parts
# (controller/runner/state_layout.py). A state Secret with neither is unreadable.
STATE_KEY: Final = "terraform.tfstate"
STATE_MANIFEST_KEY: Final = "manifest.json"
# The largest state CAPTF stores (docs/state.md): a larger one is refused before any write.
STATE_SIZE_LIMIT: Final = 128 * 1024 * 1024
# On each part Secret of a state: the object whose state, backup or rescue names it.
LABEL_STATE_PART_OF: Final = "captf.io/state-part-of"
# On a state Secret whose body is in parts: `<digest16>:<count>`, from which the parts'
# names follow (`state_part_names`); the controller holds a deletion when one is missing.
ANN_STATE_PARTS: Final = "captf.io/state-parts"
# Beside a cached Secret whose values the cache does not keep (a state): its data's keys.
DATA_KEYS: Final = "dataKeys"
# Beside a cached state: the bytes its data holds (decoded), which the state-size gauge
# reads (controller/io/object_metrics.py); Kubernetes refuses a Secret over SECRET_SIZE_LIMIT.
DATA_BYTES: Final = "dataBytes"
# Labels and annotations the runner writes on the Secrets it keeps: state backups, a
# state rescued from a failed write, plans.
LABEL_BACKUP_OF: Final = "captf.io/state-backup-of"
ANN_BACKED_UP_AT: Final = "captf.io/backed-up-at"
LABEL_RESCUE_OF: Final = "captf.io/state-rescue-of"
LABEL_PLAN_OF: Final = "captf.io/plan-of"
# A plan Secret's keys: the saved plan, and its JSON rendering (`captf plan show` reads it).
PLAN_KEY: Final = "tfplan"
PLAN_JSON_KEY: Final = "plan.json"
# On a plan Secret: what the plan changes, as addresses and actions only (never a value),
# with a fingerprint of the changes (controller/core/basics/plan_summary.py).
ANN_PLAN_SUMMARY: Final = "captf.io/plan-summary"
LABEL_OUTPUTS_OF: Final = "captf.io/outputs-of"
# On every Secret CAPTF writes (durable inputs, state and its backups and rescues,
# plans, outputs): the controller caches these with their data, by this label, and the
# user's Secrets as metadata only. Secrets written before the label existed lack it
# and are read the metadata way.
LABEL_MANAGED_BY: Final = "captf.io/managed-by"
MANAGER: Final = "captf"
MANAGED_BY: Final = {LABEL_MANAGED_BY: MANAGER}
# The error kind of the result the controller records on a Job it ended because the Job
# could not start (controller/core/jobs/starting.py).
CANNOT_START: Final = "CannotStart"
# The runner's identity in each namespace the controller provides
# (controller/core/decide/runner_rbac.py): a ServiceAccount and a RoleBinding to the
# static ClusterRole of manifests/runner-rbac.yaml, all three named RUNNER_ACCOUNT.
RUNNER_ACCOUNT: Final = "captf-runner"
# On the ServiceAccount and RoleBinding the controller created: it removes only these.
LABEL_RUNNER_RBAC: Final = "captf.io/runner-rbac"
RUNNER_RBAC_MANAGED: Final = "managed"
# "true" on a ServiceAccount that may run CAPTF Jobs: an override account
# (spec.jobs.serviceAccountName naming another) opts in with it; the provided one has it.
LABEL_RUNNER: Final = "captf.io/runner"
# On every Secret CAPTF writes (state, backups, inputs): `clusterctl move` carries
# Secrets that chain to a Cluster by owners or carry this label, and a state has no owner
# (it outlives its object by design), so without it the state would stay behind.
LABEL_CLUSTERCTL_MOVE: Final = "clusterctl.cluster.x-k8s.io/move"
# On the objects the watch benchmark creates (controller/bench/watch.py).
LABEL_BENCH: Final = "captf.io/bench"
LABEL_BENCH_BURST: Final = "captf.io/bench-burst"
ANN_INTERRUPTED_APPLY: Final = "captf.io/interrupted-apply"
# When the interrupted apply was recorded: applies created after it can clear it.
ANN_INTERRUPTED_APPLY_AT: Final = "captf.io/interrupted-apply-at"
# The apply attempt sequence when it was recorded: applies from this sequence on were
# created after the record (no clocks compared).
ANN_INTERRUPTED_APPLY_SEQ: Final = "captf.io/interrupted-apply-seq"
# On a durable inputs Secret: a Job run with it left a state (an apply, a refresh, a
# restore). Metadata of a Secret the object owns, so it survives a lost status and moves
# with the object (clusterctl move); never removed while the object exists.
ANN_APPLIED: Final = "captf.io/applied"
# On the state, its backups and the durable inputs that a deletion with deletionPolicy
# Retain kept: the object they came from (`<kind>.<name>`) and its uid. A later object of
# the same kind and name waits on them until it adopts them (spec.adoptRetainedState).
LABEL_RETAINED_FROM: Final = "captf.io/retained-from"
LABEL_RETAINED_UID: Final = "captf.io/retained-uid"

# Lease scopes (label captf.io/scope).
SCOPE_CLUSTER: Final = "cluster"
SCOPE_MEMBER: Final = "member"
SCOPE_RUN_SLOT: Final = "run-slot"
RUN_SLOT_PREFIX: Final = "captf-run-slot-"
# The ConfigMap, in the controller's namespace, that records --time-scale's origin
# (runtime/timeorigin.py): `captf run`, `make run` and the CLI's scaled "now" read it.
TIME_ORIGIN: Final = "captf-time-origin"
# On a run slot: where the Job that holds it lives (the holder identity is the Job's name).
ANN_HOLDER_NAMESPACE: Final = "captf.io/holder-namespace"
# On a run slot: the Cluster API cluster of the Job that holds it ("" for none), which
# --max-concurrent-runs-per-cluster counts (controller/core/leases/slots.py).
ANN_HOLDER_CLUSTER: Final = "captf.io/holder-cluster"
# On a cluster's operation Lease: the members' Jobs that run, as a JSON object
# {job name: time taken}. The Lease's holder is the cluster's own Job; at most one
# of the two is set at any resourceVersion (controller/core/leases/family.py).
ANN_MEMBER_JOBS: Final = "captf.io/member-jobs"
# The background budget (issue 39, controller/core/leases/budget.py). On a run slot: the
# class of the Job holding it, `background` or `change`, which --background-run-share
# counts. An identity's budget Lease (scope background-budget, in the controller's
# namespace, named by budget_lease_name): the credentials it stands for, the background
# Jobs started in the last minute as a JSON object {job: time}, and the stretch of the
# schedules of the objects reading the cloud through those credentials.
ANN_HOLDER_CLASS: Final = "captf.io/holder-class"
SCOPE_BUDGET: Final = "background-budget"
BUDGET_PREFIX: Final = "captf-budget-"
ANN_BUDGET_OF: Final = "captf.io/budget-of"
ANN_BACKGROUND_STARTS: Final = "captf.io/background-starts"
ANN_BACKGROUND_STRETCH: Final = "captf.io/background-stretch"

# Compiled-in retry timing (seconds).
BACKOFF_BASE: Final = 60.0
BACKOFF_CAP: Final = 600.0

# Kubernetes caps a Secret's data at 1 MiB.
SECRET_SIZE_LIMIT: Final = 1024 * 1024

# The CRDs accept object names of at most 63 characters (the name is a label value on
# its Jobs and Secrets), and a Job's name must fit the pod label the Job controller
# stamps with it (also 63), so Job names are cut to fit (see job_name).
JOB_NAME_LIMIT: Final = 63
# The shortest drift or refresh interval honoured, in seconds: the CRDs refuse less, and
# an object stored before they did is read as this, so nothing runs in a tight loop.
MIN_INTERVAL: Final = 60.0


class Op(StrEnum):
    PLAN = "plan"
    APPLY = "apply"
    REFRESH = "refresh"
    DRIFT = "drift"
    DESTROY = "destroy"
    RESTORE = "restore"


class Reason(StrEnum):
    """Decision reasons: triggers of a run, and waits."""

    # Waits.
    JOB_POLICY_INVALID = "JobPolicyInvalid"
    # What the admission webhook refuses (controller/core/admission), found at reconcile:
    # an object stored while the webhook was down or missed. Nothing runs until it changes.
    INVALID_SPEC = "InvalidSpec"
    # The API server refused the op's Job (or its inputs Secret or Leases); backs off.
    JOB_REFUSED = "JobRefused"
    INPUTS_TOO_LARGE = "InputsTooLarge"
    DURABLE_INPUTS_MISSING = "DurableInputsMissing"
    # Module contract: a user variable the contract reserves; a bootstrap Secret
    # without its `value`. Bad input: nothing runs until it changes.
    VARIABLES_REFUSED = "VariablesRefused"
    BOOTSTRAP_DATA_INVALID = "BootstrapDataInvalid"
    JOB_CACHE_BEHIND = "JobCacheBehind"
    JOB_RUNNING = "JobRunning"
    # A running Job whose pods cannot be created (the Job controller's FailedCreate) or
    # whose image cannot be pulled: reported at once, ended as a failure after a grace.
    JOB_CANNOT_START = "JobCannotStart"
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    CREDENTIALS_NOT_READY = "CredentialsNotReady"
    DEPENDENCIES_NOT_READY = "DependenciesNotReady"
    OWNER_NOT_READY = "OwnerNotReady"
    # The Jobs' ServiceAccount may not run them: an override without the opt-in label.
    RUNNER_RBAC_NOT_READY = "RunnerRBACNotReady"
    STATE_UNREADABLE = "StateUnreadable"
    STATE_LOST = "StateLost"
    WAITING_FOR_APPROVAL = "WaitingForApproval"
    # A TerraformPolicy denied the plan of the newest apply (or Manual plan) for these
    # inputs and this policy set: nothing runs until either changes.
    POLICY_DENIED = "PolicyDenied"
    WAITING_FOR_RUN_LEASE = "WaitingForRunLease"
    WAITING_FOR_CLUSTER_OPERATION = "WaitingForClusterOperation"
    WAITING_FOR_MACHINE_OPERATIONS = "WaitingForMachineOperations"
    # A background Job (a drift check, a re-read) waits for its share of the run slots or
    # its identity's budget a minute (issue 39); a change never does.
    WAITING_FOR_BACKGROUND_BUDGET = "WaitingForBackgroundBudget"
    OUTSIDE_CHANGE_WINDOW = "OutsideChangeWindow"
    DESTROYED = "Destroyed"
    SUSPENDED = "Suspended"  # spec.suspend: the op that would run next waits
    # Deletion (docs/deletion.md). The finalizer goes without a destroy: Retain kept the
    # state for a later object; nothing to destroy; an abandon by uid.
    RETAINED = "Retained"
    DELETING_WITHOUT_STATE = "DeletingWithoutState"
    ABANDONED = "Abandoned"
    # The state is lost or unreadable and the object applied before: no destroy, the
    # finalizer stays, until a restore or an abandon.
    DELETION_HELD = "DeletionHeld"
    # Another object of this kind and name retained the state: no Job until it is adopted.
    RETAINED_STATE_FOUND = "RetainedStateFound"
    # Cluster API: whom the object acts for, and whether it may act now.
    PAUSED = "Paused"  # Cluster.spec.paused or the paused annotation: no Job starts
    MOVED = "Moved"  # deleted by clusterctl move: the finalizer goes without a destroy
    EXTERNALLY_MANAGED = "ExternallyManaged"  # the managed-by annotation: left alone
    WAITING_FOR_OWNER = "WaitingForOwner"
    OWNER_REF_MISMATCH = "OwnerRefMismatch"  # the owner's infrastructureRef names another
    CLUSTER_NOT_TERRAFORM = "ClusterNotTerraform"
    WAITING_FOR_CLUSTER_INFRASTRUCTURE = "WaitingForClusterInfrastructure"
    WAITING_FOR_BOOTSTRAP_DATA = "WaitingForBootstrapData"
    DELETION_BLOCKED = "DeletionBlocked"  # a cluster's machines and pools go first
    # Module images (controller/core/decide/pinning.py): a Job that needs the reference
    # resolved waits for io's lookup; a lookup that failed or found an image the checks
    # refuse waits as the ImageResolved condition says.
    IMAGE_RESOLVING = "ImageResolving"
    IMAGE_NOT_FOUND = "ImageNotFound"
    REGISTRY_UNAUTHORIZED = "RegistryUnauthorized"
    REGISTRY_UNAVAILABLE = "RegistryUnavailable"
    IMAGE_TOO_LARGE = "ImageTooLarge"
    IMAGE_ROLE_MISMATCH = "ImageRoleMismatch"
    # Triggers.
    DELETING = "Deleting"
    RESTORE_REQUESTED = "RestoreRequested"
    INTERRUPTED_APPLY = "InterruptedApply"
    INPUTS_CHANGED = "InputsChanged"
    # A cluster's or pool's tag now names another digest than the one applied, and
    # nothing else of the inputs changed.
    IMAGE_TAG_MOVED = "ImageTagMoved"
    LAST_APPLY_FAILED = "LastApplyFailed"
    NO_STATE = "NoState"
    STATE_WITHOUT_INPUTS_HASH = "StateWithoutInputsHash"
    DRIFT_REMEDIATION = "DriftRemediation"
    DRIFT_CHECK_DUE = "DriftCheckDue"
    REFRESH_DUE = "RefreshDue"
    # A machine's or pool's apply whose contract outputs were not definite.
    REFRESH_AFTER_APPLY = "RefreshAfterApply"
    # The newest reading of the contract's health is pending: 30 s doubling to 5 min.
    HEALTH_PENDING = "HealthPending"
    # A Ready machine's health is re-read: spec.health.interval (5 min) has passed.
    HEALTH_CHECK_DUE = "HealthCheckDue"
    # A pool's members are re-read: spec.membership.interval (60 s) has passed.
    MEMBERSHIP_DUE = "MembershipRefreshDue"


# What makes an op run (the Run's reason).
TRIGGERS: Final = frozenset(
    {
        Reason.DELETING,
        Reason.RESTORE_REQUESTED,
        Reason.INTERRUPTED_APPLY,
        Reason.INPUTS_CHANGED,
        Reason.IMAGE_TAG_MOVED,
        Reason.LAST_APPLY_FAILED,
        Reason.NO_STATE,
        Reason.STATE_WITHOUT_INPUTS_HASH,
        Reason.DRIFT_REMEDIATION,
        Reason.DRIFT_CHECK_DUE,
        Reason.REFRESH_DUE,
        Reason.REFRESH_AFTER_APPLY,
        Reason.HEALTH_PENDING,
        Reason.HEALTH_CHECK_DUE,
        Reason.MEMBERSHIP_DUE,
    }
)


def backoff_reason(trigger: str) -> str:
    """The wait reason while a trigger's op backs off, e.g. InputsChangedBackoff."""
    return f"{trigger}Backoff"


# The waits of an op backing off after failures: one per trigger.
BACKOFF_REASONS: Final = frozenset(backoff_reason(t) for t in TRIGGERS)
# The waits that end when a Lease comes free.
LEASE_WAITS: Final = frozenset(
    {
        Reason.WAITING_FOR_RUN_LEASE,
        Reason.WAITING_FOR_CLUSTER_OPERATION,
        Reason.WAITING_FOR_MACHINE_OPERATIONS,
    }
)


# The state Secret's key of the root's contract outputs ({name: value} JSON), written by
# the runner with the state; the controller caches it up to the limit, none above it.
STATE_OUTPUTS_KEY: Final = "outputs.json"
STATE_OUTPUTS_LIMIT: Final = 64 * 1024


# Per-object Secrets (the state, its backups and rescues, the durable inputs) are named
# from the object's namespace, kind and name: `<name>-<kind>-<key>`, key the first ten hex
# digits of SHA-256 over `<namespace>/<kind>/<name>`. Objects of two kinds with one name
# never share a Secret; the uid takes no part, so `clusterctl move` (which makes new
# uids) keeps the names. The name leads for the operator's eye; the key, not the name,
# makes it unique. Each also carries the kind and name labels, and is read only when
# they match the object (`labelled_for`): a Secret whose name merely looks like ours is
# never taken for one of ours.
KIND_SLUGS: Final = {CLUSTER: "cluster", POOL: "pool", MACHINE: "machine"}
OBJECT_KEY_LENGTH: Final = 10


def object_key(namespace: str, kind: str, name: str) -> str:
    return hashlib.sha256(f"{namespace}/{kind}/{name}".encode()).hexdigest()[:OBJECT_KEY_LENGTH]


def secret_base(namespace: str, kind: str, name: str) -> str:
    slug = KIND_SLUGS.get(kind, kind.lower())
    return f"{name}-{slug}-{object_key(namespace, kind, name)}"


def state_secret_name(namespace: str, kind: str, name: str) -> str:
    return f"{secret_base(namespace, kind, name)}-state"


def backup_secret_name(state_secret: str, serial: int) -> str:
    return f"{state_secret}-{serial}"


def state_part_name(state_secret: str, digest: str, index: int) -> str:
    """A part of the state (or backup, or rescue) `state_secret`, named from the SHA-256
    of the whole compressed body (controller/runner/state_layout.py)."""
    return f"{state_secret}-part-{digest[:16]}-{index}"


def state_part_names(state_secret: str, annotations: Mapping[str, str]) -> list[str]:
    """The parts a state Secret's ANN_STATE_PARTS names; none when it has none or the
    value is not `<digest16>:<count>`."""
    digest, _, count = (annotations.get(ANN_STATE_PARTS) or "").partition(":")
    if not digest or not count.isdigit():
        return []
    return [state_part_name(state_secret, digest, i) for i in range(int(count))]


def inputs_secret_prefix(namespace: str, kind: str, name: str) -> str:
    return f"{secret_base(namespace, kind, name)}-inputs-"


# The names before they carried kind and namespace (read, for objects that wrote them,
# while `controller/core/plan/state_moves.py` moves them; never written).
def legacy_state_secret_name(name: str) -> str:
    return f"{name}-state"


def legacy_inputs_secret_prefix(name: str) -> str:
    return f"{name}-inputs-"


def labelled_for(secret: Mapping[str, Any] | None, kind: str, name: str) -> bool:
    """Whether a Secret's kind and name labels name this object."""
    labels = ((secret or {}).get("metadata") or {}).get("labels") or {}
    return bool(name) and labels.get(LABEL_KIND) == kind and labels.get(LABEL_NAME) == name


def op_lease_name(kind: str, name: str) -> str:
    return f"captf-op-{kind.lower()}-{name}"


# Tenancy (docs/security.md, "Identities"): the cluster-scoped identity objects name a
# Secret in one namespace and the namespaces allowed to use it. The controller copies
# that Secret into each allowed namespace that uses it (the mirror), labelled with the
# identity's name, and holds the identity with its finalizer while anything names it.
IDENTITY: Final = "TerraformClusterIdentity"
IDENTITY_PLURAL: Final = "terraformclusteridentities"
IDENTITY_FINALIZER: Final = "captf.io/identity-in-use"
LABEL_IDENTITY_MIRROR: Final = "captf.io/identity-mirror"
# The condition on a using object, and its reasons (the True one first).
COND_IDENTITY_ALLOWED: Final = "IdentityAllowed"


class IdentityReason(StrEnum):
    ALLOWED = "IdentityAllowed"
    IDENTITY_NOT_FOUND = "IdentityNotFound"
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
    SECRET_MISSING = "SecretMissing"
    SECRET_KEYS_MISSING = "SecretKeysMissing"


# Policies on plans (docs/api.md, "TerraformPolicy"): cluster-scoped rules judged by the
# runner after a plan and before its apply. An apply or plan Job records the hash of the
# policy set it was given; the object's condition says what the newest judgement found.
POLICY_KIND: Final = "TerraformPolicy"
POLICY_PLURAL: Final = "terraformpolicies"
ANN_POLICY_HASH: Final = "captf.io/policy-hash"
COND_POLICY_COMPLIANT: Final = "PolicyCompliant"
