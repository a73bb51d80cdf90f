"""The TerraformPlans of one object, as a pass leaves them: created, updated, pruned.

A Job that waits for a person (`awaiting_approval`) gets a TerraformPlan of its own
name, owned by the object (controller=true) and labelled with its kind, name and uid.
Its status is the Job's plan summary (addresses, actions, counts, fingerprint: never a
value), the inputs hash the Job ran with, and a phase:

  Pending     it is what the object waits on
  Approved    approved and current, and its apply is due or runs
  Applied     the apply that carried it out succeeded
  Changed     the apply that carried it out planned different changes (plan-changed)
  Superseded  anything else: a newer plan, new inputs, its apply failed

The last three are final: a phase once finished is never rewritten, so a plan keeps
saying what became of it after its Jobs are pruned. Finished plans beyond `kept` per
object are deleted, oldest first. Pure: io creates, patches and deletes."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.basics.names import ANN_PLAN_JOB, API_VERSION, PLAN_KIND, Op
from controller.core.decide.approval_waits import awaiting_approval
from controller.core.decide.approvals import (
    FINISHED,
    Phase,
    is_finished,
    job_summary,
    kept_no_summary,
    status_of,
)
from controller.core.decide.context import Context
from controller.core.jobs.job import (
    LONG_AGO,
    Outcome,
    annotations_of,
    created_at,
    inputs_hash_of,
    name_of,
    op_of,
    result,
)
from controller.core.jobs.job import (
    is_finished as job_finished,
)
from controller.core.plan.jobspec import object_labels, owner_reference
from controller.core.plan.last_run import changes_shown
from controller.core.spec.sharding import shard_labels
from runtime.jsonobj import Json

# The fingerprint of a plan whose Job kept no summary.
UNKNOWN = "unknown"
# The status fields the controller owns; a pass writes them when any differs.
_FIELDS = ("inputsHash", "fingerprint", "counts", "resources", "changes", "phase")


@dataclass(frozen=True)
class PlanWrites:
    create: tuple[Json, ...] = ()  # new TerraformPlans (spec only: status goes next)
    status: tuple[tuple[str, Json], ...] = ()  # (name, merge patch of status)
    delete: tuple[str, ...] = ()  # finished plans past the number kept

    def __bool__(self) -> bool:
        return bool(self.create or self.status or self.delete)


NO_WRITES = PlanWrites()


def writes_of(ctx: Context | None, kept: int) -> PlanWrites:
    """The pass's TerraformPlan writes, in the context the decision read (the books);
    `kept`: the finished plans kept per object (Settings.kept_plans)."""
    if ctx is None:
        return NO_WRITES  # the policy or inputs cannot be read: nothing is decided
    waiting = awaiting_approval(ctx)
    existing = {name_of(p): p for p in ctx.snap.plans}
    created = () if waiting is None or waiting in existing else (_new_plan(ctx, waiting),)
    plans = [*existing.values(), *created]
    desired = {name_of(p): _desired(ctx, p, waiting) for p in plans}
    doomed = _pruned(plans, desired, kept)
    patches = tuple(
        (name, status)
        for name, status in desired.items()
        if name not in doomed and not _shows(existing.get(name), status)
    )
    return PlanWrites(create=created, status=patches, delete=doomed)


def _shows(plan: Json | None, status: Json) -> bool:
    """The stored plan's status already holds these fields, as they are."""
    stored = status_of(plan) if plan is not None else {}
    return plan is not None and all(stored.get(k) == v for k, v in status.items())


def _new_plan(ctx: Context, job: str) -> Json:
    obj = ctx.snap.obj
    meta = obj["metadata"]
    labels = object_labels(obj) | shard_labels(obj, ctx.settings.shard_keys)
    return {
        "apiVersion": API_VERSION,
        "kind": PLAN_KIND,
        "metadata": {
            "name": job,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(obj)],
        },
        "spec": {
            "approved": False,
            "target": {"kind": obj["kind"], "name": meta["name"], "uid": meta["uid"]},
        },
    }


def _desired(ctx: Context, plan: Json, waiting: str | None) -> Json:
    """The status fields the plan should show: the Job's summary while its plan Secret is
    there (kept as stored once it is gone), and the phase."""
    name, stored = name_of(plan), status_of(plan)
    out = {k: stored[k] for k in _FIELDS if k in stored}
    summary = job_summary(ctx.snap, name)
    if summary is not None:
        out |= summary.to_json()
    # A Job that kept no summary (a runner before it wrote one): nothing to show, and
    # nothing to compare, but its plan can still be approved. One whose plan Secret is
    # not seen yet shows no fingerprint, and approving it counts once it does.
    if "fingerprint" not in out and kept_no_summary(ctx.snap, name):
        out["fingerprint"] = UNKNOWN
    job = _job(ctx, name)
    # What an approver reads at a glance: counts and the first addresses of each action.
    shown = changes_shown(result(job) or {}, ctx.snap.redactor(job)) if job is not None else None
    if shown is not None:
        out["changes"] = shown
    made_for = inputs_hash_of(job) if job is not None else None
    out["inputsHash"] = out.get("inputsHash") or made_for or ctx.inputs.hash
    out["phase"] = phase_of(ctx, plan, waiting).value
    return out


def phase_of(ctx: Context, plan: Json, waiting: str | None) -> Phase:
    """The plan's phase, by the table of the module's docstring."""
    stored = status_of(plan).get("phase")
    if stored in FINISHED:
        return Phase(stored)
    name = name_of(plan)
    carrier = _carried_out_by(ctx, name)
    if carrier is not None:
        return _carried_phase(ctx, carrier)
    if name == waiting:
        return Phase.PENDING
    if name in ctx.approved and _still_due(ctx, name):
        return Phase.APPROVED
    return Phase.SUPERSEDED


def _carried_phase(ctx: Context, carrier: Json) -> Phase:
    if not job_finished(carrier):
        return Phase.APPROVED
    record = next((r for r in ctx.history if r.name == name_of(carrier)), None)
    outcome = record.outcome if record is not None else None
    if outcome == Outcome.SUCCESS:
        return Phase.APPLIED
    return Phase.CHANGED if outcome == Outcome.PLAN_CHANGED else Phase.SUPERSEDED


def _carried_out_by(ctx: Context, name: str) -> Json | None:
    """The newest apply Job that carries the plan out (it names it)."""
    carriers = [
        j
        for j in ctx.snap.jobs
        if op_of(j) == Op.APPLY and annotations_of(j).get(ANN_PLAN_JOB) == name
    ]
    return max(carriers, key=lambda j: (created_at(j) or LONG_AGO, name_of(j)), default=None)


def _still_due(ctx: Context, name: str) -> bool:
    """An approved plan is carried out next: the open Manual plan, or the newest apply (the
    one that stopped on it). Anything older was left behind."""
    opened = ctx.open_plan()
    newest = ctx.history.newest(Op.APPLY)
    return (opened is not None and opened.name == name) or (
        newest is not None and newest.name == name
    )


def _job(ctx: Context, name: str) -> Json | None:
    return next((j for j in ctx.snap.jobs if name_of(j) == name), None)


def _pruned(plans: list[Json], desired: dict[str, Json], kept: int) -> tuple[str, ...]:
    """Finished plans past the `kept` newest, oldest first (by creation, then name)."""
    finished = [p for p in plans if desired[name_of(p)].get("phase") in FINISHED]
    finished.sort(
        key=lambda p: (str(p.get("metadata", {}).get("creationTimestamp") or ""), name_of(p))
    )
    excess = max(len(finished) - kept, 0)
    return tuple(name_of(p) for p in finished[:excess])


def active_jobs(ctx: Context | None) -> frozenset[str]:
    """The Jobs whose TerraformPlans are not finished: their Jobs (and plan Secrets) stay
    while a person may still approve them, or their apply runs."""
    if ctx is None:
        return frozenset()
    waiting = awaiting_approval(ctx)
    kept = {name_of(p) for p in ctx.snap.plans if not is_finished(p)}
    return frozenset(kept | ({waiting} if waiting else set()))
