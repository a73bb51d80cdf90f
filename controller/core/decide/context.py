"""What every step of DecideOp reads: the snapshot, the time, the settings, the facts, and
the object's policy and inputs, read once per pass.

`read_spec` is the one reader of the policy and the inputs: the decision, the plan
and its launch all take them from the Reading it returns, so one pass cannot see
two versions of them or handle their errors two ways."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property

from controller.core.admission.checks import spec_refusals
from controller.core.admission.refusal import refusals_message
from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    ANN_PLAN_JOB,
    ANN_SERIAL,
    CLUSTER,
    MUTABLE_KINDS,
    SECRET_SIZE_LIMIT,
    Op,
    Reason,
)
from controller.core.contract.roles import declares_contract
from controller.core.decide import approvals, contract_inputs, pinning, runner_rbac
from controller.core.decide.contract_inputs import NotYet, Refused
from controller.core.decide.decision import Requeue
from controller.core.decide.facts import NO_FACTS, Facts
from controller.core.decide.runner_rbac import Verdict
from controller.core.decide.settings import Settings
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.history import Finished, History
from controller.core.jobs.job import Outcome, annotations_of, created_at, inputs_hash_of, op_of
from controller.core.spec.image import DEFAULT_SIZE_LIMIT, ImageFact
from controller.core.spec.inputs import Inputs, InputsMissing, render
from controller.core.spec.plan_policies import PolicySet, policy_set
from controller.core.spec.policy import Policy, PolicyError, RunnerPolicy, read_policy
from controller.core.spec.refs import cluster_of, spec_of
from runtime.jsonobj import Json

_INTEGER = re.compile(r"[+-]?[0-9]+")
# The wait of an object whose policy or inputs cannot be used: a change to the object or
# its inputs wakes the reconcile sooner.
INVALID_WAIT = 600.0


@dataclass(frozen=True)
class Context:
    snap: Snapshot
    now: datetime
    policy: Policy
    inputs: Inputs
    settings: Settings = field(default_factory=Settings)
    facts: Facts = NO_FACTS

    def on(self, snap: Snapshot) -> Context:
        """The same context over another view of the object (the plan's bookkeeping)."""
        return replace(self, snap=snap)

    @property
    def history(self) -> History:
        return self.snap.history

    @cached_property
    def approved(self) -> frozenset[str]:
        """The waiting Jobs whose TerraformPlans are approved and current."""
        return approvals.approved_jobs(self.snap, self.inputs.hash)

    @cached_property
    def runner_verdict(self) -> Verdict | None:
        """The runner RBAC of the object's account, once per pass: the guard `runner_rbac`
        and the plan (its condition, what it creates before the Job) read this one; None
        when nothing was read of the namespace's RBAC (`captf decide` from a file)."""
        if self.facts.runner is None:
            return None
        return runner_rbac.verdict(
            self.snap.namespace, self.policy.service_account, self.facts.runner
        )

    @cached_property
    def policies(self) -> PolicySet | None:
        """The policy set the object's apply and plan Jobs are given (None: no policy
        selects it): its hash is the policy version a PolicyDenied wait is for."""
        snap = self.snap
        return policy_set(snap.policies, snap.obj, snap.related, snap.namespace_labels)

    @property
    def state_inputs_hash(self) -> str | None:
        state = self.snap.state_secret
        return annotations_of(state).get(ANN_INPUTS_HASH) if state else None

    def has_applied(self) -> bool:
        """The first successful apply happened (its Job may be pruned; the state keeps it)."""
        applied = self.history.newest(Op.APPLY, outcome=Outcome.SUCCESS)
        return bool(self.state_inputs_hash) or applied is not None

    def plan_used(self, plan: Finished) -> bool:
        """An apply carried the plan out: it names the plan, or it was created after the plan
        finished (one Job runs at a time, and in Manual mode every apply follows its plan)."""
        for job in self.snap.jobs:
            if op_of(job) != Op.APPLY:
                continue
            if annotations_of(job).get(ANN_PLAN_JOB) == plan.name:
                return True
            started = created_at(job)
            if started is not None and started >= plan.at:
                return True
        return False

    def plan_current(self, plan: Finished) -> bool:
        """The plan was made for the current inputs (a plan without a recorded hash is trusted)."""
        made_for = inputs_hash_of(plan.job)
        return made_for is None or made_for == self.inputs.hash

    def open_plan(self) -> Finished | None:
        """The newest successful plan of the current inputs that no apply has used yet."""
        plan = self.history.newest(Op.PLAN)
        if plan is None or plan.outcome != Outcome.SUCCESS:
            return None
        return plan if self.plan_current(plan) and not self.plan_used(plan) else None

    def state_serial_problem(self) -> str | None:
        state = self.snap.state_secret
        if state is None:
            return None
        raw = annotations_of(state).get(ANN_SERIAL)
        # A plain decimal integer: int() alone would also take "1_000", " 3" or "\u0663".
        if raw is None or _INTEGER.fullmatch(raw) is None:
            return f"state Secret {self.snap.state_shown} has no integer {ANN_SERIAL} ({raw!r})"
        return None


@dataclass(frozen=True)
class Reading:
    """The object's policy and rendered inputs, each None when it cannot be read, and the
    wait that stops a decision when either is unusable (the first problem found).

    `contract_pending` says why an object of a contract role has no contract inputs yet
    (its Cluster API objects are not all there): not a wait of its own, since the owner
    waits of DecideOp say why and come first; the inputs are then the module and the
    user variables alone."""

    policy: Policy | None
    inputs: Inputs | None
    wait: Requeue | None
    contract_pending: str | None = None

    def context(
        self, snap: Snapshot, now: datetime, settings: Settings, facts: Facts
    ) -> Context | None:
        """The decision context, when both were read (inputs too large included: the
        status still reports on them)."""
        if self.policy is None or self.inputs is None:
            return None
        return Context(snap, now, self.policy, self.inputs, settings, facts)


def read_spec(
    snap: Snapshot,
    runner: RunnerPolicy,
    *,
    image: ImageFact | None = None,
    image_size_limit: int = DEFAULT_SIZE_LIMIT,
) -> Reading:
    """Reads the policy (under the operator's runner policy) and renders the inputs, a
    module image's with the digest its Job runs (`image`: io's lookup, see pinning.py)."""
    wait = None
    try:
        policy: Policy | None = read_policy(snap.spec, runner, inherited=cluster_jobs(snap))
    except PolicyError as err:
        policy = None
        wait = Requeue(Reason.JOB_POLICY_INVALID, INVALID_WAIT, message=str(err))
    try:
        inputs: Inputs | None = render(snap.spec, snap.configmaps, snap.secrets)
    except InputsMissing as err:
        inputs = None
        wait = wait or Requeue(Reason.DURABLE_INPUTS_MISSING, INVALID_WAIT, message=str(err))
    pending = None
    if inputs is not None:
        chosen = pinning.choose(snap, inputs, image, image_size_limit)
        if isinstance(chosen, Requeue):
            wait = wait or chosen
        else:
            inputs = chosen
        inputs, refused, pending = _with_contract(snap, inputs)
        wait = wait or refused
    invalid = None if wait is not None else _invalid(snap)
    if invalid is not None:
        # Read as an unusable policy (Ready False for this reason), as JobPolicyInvalid is.
        policy, wait = None, invalid
    if wait is None and inputs is not None and inputs.too_large():
        message = f"rendered inputs are {inputs.size()} bytes; a Secret holds {SECRET_SIZE_LIMIT}"
        wait = Requeue(Reason.INPUTS_TOO_LARGE, INVALID_WAIT, message=message)
    return Reading(policy, inputs, wait, pending)


def cluster_jobs(snap: Snapshot) -> Json | None:
    """The spec.jobs of a pool's or machine's TerraformCluster, whose pod policy fields it
    takes where its own are unset (None for a cluster, or while its cluster is unknown)."""
    if snap.kind == CLUSTER:
        return None
    cluster = snap.related.get((CLUSTER, cluster_of(snap.obj, snap.related)))
    jobs = spec_of(cluster).get("jobs") if cluster else None
    return jobs if isinstance(jobs, dict) else None


def _invalid(snap: Snapshot) -> Requeue | None:
    """The wait of a spec the admission webhook would have refused: the webhook may have
    been down (its failurePolicy lets such a request through) or not installed."""
    refused = spec_refusals(snap.kind, snap.obj)
    if not refused:
        return None
    return Requeue(Reason.INVALID_SPEC, INVALID_WAIT, message=refusals_message(refused))


def speaks_contract(inputs: Inputs) -> bool:
    """Whether the object's module is a role module of the contract: it declares
    `captf_contract`, or it is a module image (a role module by the image contract, whose
    files are not seen here). Only such a module gets contract inputs, and only its
    contract readings are waited on (triggers.py); any other runs as its own root."""
    return inputs.image is not None or declares_contract(inputs.module)


def _with_contract(snap: Snapshot, inputs: Inputs) -> tuple[Inputs, Requeue | None, str | None]:
    """The inputs with the object's contract inputs, the wait of a refused input, and why
    there are none yet. An immutable machine, once applied, keeps the inputs it was
    applied with (its drift and destroy see what it was created from); any object whose
    Cluster API objects are gone (a deletion) falls back to them too."""
    role = contract_inputs.role_of(snap.kind)
    if role is None or not speaks_contract(inputs):
        return inputs, None, None
    applied = contract_inputs.applied_inputs(snap, inputs)
    if applied is not None and snap.kind not in MUTABLE_KINDS:
        return applied, None, None
    assembled = contract_inputs.assemble(snap, inputs.variables)
    match assembled:
        case NotYet(message=message):
            return (applied or inputs), None, None if applied else message
        case Refused(reason=reason, message=message):
            return inputs, Requeue(reason, INVALID_WAIT, message=message), None
        case dict():
            return contract_inputs.with_contract(inputs, role, assembled), None, None
    return inputs, None, None


def context_of(
    snap: Snapshot, now: datetime, settings: Settings | None = None, facts: Facts = NO_FACTS
) -> Context | Requeue:
    """What every step reads, or the wait when the policy or the inputs cannot be used."""
    settings = settings or Settings()
    reading = read_spec(
        snap, settings.runner, image=facts.image, image_size_limit=settings.image_size_limit
    )
    if reading.wait is not None:
        return reading.wait
    ctx = reading.context(snap, now, settings, facts)
    assert ctx is not None  # no wait: both were read
    return ctx
