"""Which waiting Jobs their TerraformPlans approve.

A plan that waits for a person (a Manual plan, an apply blocked by the guard or whose
plan changed since approval) is a TerraformPlan named after the waiting Job and owned
by the object. A person approves it by setting its spec.approved. The approval counts
only while the plan is current: not finished (Applied, Superseded, Changed), made for
the inputs the object has now (status.inputsHash), and showing the changes the Job's
plan makes (status.fingerprint, copied from the plan Secret's summary). A plan whose
status the controller has not filled yet approves nothing: a person approves what they
can see.

The annotation `captf.io/approve`, the approval before TerraformPlan, is not read."""

from __future__ import annotations

from enum import StrEnum

from controller.core.basics.names import ANN_PLAN_SUMMARY
from controller.core.basics.plan_summary import PlanSummary, decode
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import annotations_of, name_of, result
from runtime.jsonobj import Json


class Phase(StrEnum):
    PENDING = "Pending"  # waits for a person
    APPROVED = "Approved"  # approved and current: its apply is due, or runs
    APPLIED = "Applied"  # the apply that carried it out succeeded
    SUPERSEDED = "Superseded"  # a newer plan, new inputs or a failed apply replaced it
    CHANGED = "Changed"  # its apply planned different changes (plan-changed)


# Finished plans: their phase never changes again, and they are pruned past a number.
FINISHED = frozenset({Phase.APPLIED, Phase.SUPERSEDED, Phase.CHANGED})


def spec_of(plan: Json) -> Json:
    return plan.get("spec") or {}


def status_of(plan: Json) -> Json:
    return plan.get("status") or {}


def is_finished(plan: Json) -> bool:
    return status_of(plan).get("phase") in FINISHED


def _plan_secret(snap: Snapshot, job_name: str) -> tuple[bool, Json | None]:
    """Whether the Job `job_name` names a plan Secret, and that Secret when it is there."""
    job = next((j for j in snap.jobs if name_of(j) == job_name), None)
    secret_name = (result(job) or {}).get("planSecret") if job is not None else None
    return bool(secret_name), snap.secrets.get(str(secret_name)) if secret_name else None


def job_summary(snap: Snapshot, job_name: str) -> PlanSummary | None:
    """The summary on the plan Secret of the object's Job `job_name`, when both are there."""
    _, secret = _plan_secret(snap, job_name)
    return decode(annotations_of(secret).get(ANN_PLAN_SUMMARY)) if secret else None


def kept_no_summary(snap: Snapshot, job_name: str) -> bool:
    """The Job's runner kept no summary (it predates them): its Job names no plan Secret,
    or the Secret is there without one. Not so while a named Secret is not seen yet."""
    named, secret = _plan_secret(snap, job_name)
    return not named or (secret is not None and job_summary(snap, job_name) is None)


def approved_fingerprint(snap: Snapshot, job_name: str) -> str | None:
    """The fingerprint the approved TerraformPlan of `job_name` showed, when it knows one:
    the apply carrying the plan out must plan exactly that."""
    plan = next((p for p in snap.plans if name_of(p) == job_name), None)
    if plan is None or spec_of(plan).get("approved") is not True:
        return None
    shown = status_of(plan).get("fingerprint")
    return shown if isinstance(shown, str) and shown.startswith("sha256:") else None


def approved_jobs(snap: Snapshot, inputs_hash: str) -> frozenset[str]:
    """The waiting Jobs whose TerraformPlans are approved and current."""
    return frozenset(name_of(p) for p in snap.plans if _approves(snap, p, inputs_hash))


def _approves(snap: Snapshot, plan: Json, inputs_hash: str) -> bool:
    status = status_of(plan)
    if spec_of(plan).get("approved") is not True or is_finished(plan):
        return False
    if status.get("inputsHash") != inputs_hash or not status.get("fingerprint"):
        return False
    shown = job_summary(snap, name_of(plan))
    return shown is None or shown.fingerprint == status["fingerprint"]
