"""The guards: everything that stands between a due op and its Job, in one ordered list.

A step of DecideOp (steps.py) finds an op due and asks `run` for it; `run` checks the
rows of GUARDS in order, and the first that holds turns the op into its wait, which is
the step's decision. Only when none holds is the decision a Run, carrying what the
guards computed on the way (the Leases the launch takes, the run slots to try next), so
the plan launches it without asking again. The order is part of the API: it is the order
of the reasons users see (docs/decisions.md, "The guards", holds the two together, and
tests/unit/core/decide/test_reasons_table.py holds the reasons of a table of snapshots).

A guard reads only its context: the Snapshot, the Settings, the Facts (a refused Job,
the runner's RBAC, the registry's answer) and the time, so `captf decide` prints the
wait the controller makes. Without Facts (`captf decide -f`) the guards that read them
never hold.

A new wait between a due op and its Job is one row here: its name, the reasons it
gives, its wait, and its check over the `Due` op. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from controller.core.basics.names import Op, Reason
from controller.core.decide import approvals, background, claims, gates, holds, pinning
from controller.core.decide.claims import LEASE_WAIT, LeaseReading
from controller.core.decide.context import Context
from controller.core.decide.decision import Decision, Requeue, Run
from controller.core.jobs import backoff

# spec.suspend: the spec change that resumes wakes the reconcile sooner.
SUSPEND_WAIT = 600.0


@dataclass(frozen=True)
class Due:
    """An op a step found due, as the guards see it: what its Run will be, and what the
    guards read of it, each computed once and shared by the rows that need it."""

    ctx: Context
    op: str
    trigger: str
    guarded: bool = False
    remediation: bool = False
    plan_job: str | None = None
    restore_serial: str | None = None
    message: str = ""
    # When its schedule came due (a background op's): the first due is served first.
    due: datetime | None = None

    @cached_property
    def job(self) -> str:
        """The name of the Job the launch would create."""
        return self.ctx.snap.next_job(self.op)[0]

    @cached_property
    def leases(self) -> LeaseReading:
        return LeaseReading(self.ctx, self.job, self.op)

    def run(self) -> Run:
        """The Run once no guard holds, with the claims the Lease guards computed."""
        ctx, op = self.ctx, self.op
        taken = self.leases.claims
        assert not isinstance(taken, Requeue), "the claims guard let a held Lease through"
        return Run(
            op=op,
            reason=self.trigger,
            retry=backoff.retry_number(ctx.history, op),
            guarded=self.guarded and op == Op.APPLY,
            drift_remediation=self.remediation and op == Op.APPLY,
            plan_job=self.plan_job,
            plan_fingerprint=(
                approvals.approved_fingerprint(ctx.snap, self.plan_job) if self.plan_job else None
            ),
            restore_serial=self.restore_serial,
            message=self.message,
            claims=taken,
            other_slots=self.leases.other_slots,
        )


Check = Callable[[Due], Requeue | None]


@dataclass(frozen=True)
class Guard:
    """One row: the guard's name (as docs/decisions.md's table "The guards" lists it), the
    reasons its wait may give, how long it waits (seconds; None: until what it waits for
    ends, computed), and the check. A guard of some ops only reads which in the table of
    operations (controller/core/basics/ops.py)."""

    name: str
    reasons: tuple[str, ...]
    wait: float | None
    check: Check


def identity(due: Due) -> Requeue | None:
    return gates.identity_held(due.ctx, due.op)


def backoff_guard(due: Due) -> Requeue | None:
    return gates.check_backoff(due.ctx, due.op, due.trigger)


def window(due: Due) -> Requeue | None:
    return gates.check_window(due.ctx, due.op)


def background_budget(due: Due) -> Requeue | None:
    return background.held(due.ctx, due.op, due.job, due.due)


def leases(due: Due) -> Requeue | None:
    return claims.busy(due.leases, due.op)


def suspended(due: Due) -> Requeue | None:
    """spec.suspend holds every new Job; what it holds stays visible as the op and its
    trigger."""
    if not due.ctx.policy.suspend:
        return None
    message = f"spec.suspend is true; {due.op} ({due.trigger}) would run next"
    return Requeue(Reason.SUSPENDED, SUSPEND_WAIT, op=due.op, message=message)


def refused(due: Due) -> Requeue | None:
    return holds.refused(due.ctx, due.op, due.job)


def runner_rbac(due: Due) -> Requeue | None:
    return holds.runner_rbac_not_ready(due.ctx)


def claimed(due: Due) -> Requeue | None:
    taken = due.leases.claims
    return taken if isinstance(taken, Requeue) else None


def image(due: Due) -> Requeue | None:
    return holds.image_resolving(due.ctx, due.op, due.trigger)


_LEASE_REASONS = (
    Reason.WAITING_FOR_RUN_LEASE,
    Reason.WAITING_FOR_CLUSTER_OPERATION,
    Reason.WAITING_FOR_MACHINE_OPERATIONS,
)

# The order, as docs/decisions.md's table "The guards" lists it (a test holds the two
# together): whom the Job runs as, when the op may run again, a background Job's share
# of the slots and its budget (before the Leases, so it waits as background and a freed
# slot wakes the changes first), the Leases the snapshot shows, spec.suspend; then what
# only a live pass knows (a refused Job, the runner's RBAC), the Leases the launch would
# take, and the module image's lookup last, since io makes it only for a Run that
# nothing else holds.
GUARDS: tuple[Guard, ...] = (
    Guard("identity", (Reason.CREDENTIALS_NOT_READY,), None, identity),
    Guard("backoff", ("<Trigger>Backoff",), None, backoff_guard),
    Guard("window", (Reason.OUTSIDE_CHANGE_WINDOW,), None, window),
    Guard("background", (Reason.WAITING_FOR_BACKGROUND_BUDGET,), None, background_budget),
    Guard("leases", _LEASE_REASONS, LEASE_WAIT, leases),
    Guard("suspended", (Reason.SUSPENDED,), SUSPEND_WAIT, suspended),
    Guard("refused", (Reason.JOB_REFUSED,), None, refused),
    Guard("runner_rbac", (Reason.RUNNER_RBAC_NOT_READY,), holds.RUNNER_RBAC_WAIT, runner_rbac),
    Guard("claims", (*_LEASE_REASONS, Reason.WAITING_FOR_BACKGROUND_BUDGET), LEASE_WAIT, claimed),
    Guard("image", (Reason.IMAGE_RESOLVING,), pinning.RESOLVING_WAIT, image),
)


def run(
    ctx: Context,
    op: str,
    trigger: str,
    *,
    guarded: bool = False,
    remediation: bool = False,
    plan_job: str | None = None,
    restore_serial: str | None = None,
    message: str = "",
    due: datetime | None = None,
) -> Decision:
    """Run the op unless a guard holds it back: the first that does gives the wait. `due`:
    when a background op's schedule came due, which orders the waiters for its budget."""
    due_op = Due(ctx, op, trigger, guarded, remediation, plan_job, restore_serial, message, due)
    for guard in GUARDS:
        wait = guard.check(due_op)
        if wait is not None:
            return wait
    return due_op.run()
