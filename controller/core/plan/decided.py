"""The decision part of a pass: the spec read once, the finished Jobs to account, a Job
that disappeared, the snapshot as the bookkeeping leaves it, and DecideOp's decision in
that view (its holds included). `plan` (planner.py) carries the rest of the pass out of
it; `captf decide` prints `decision_of`, so the two cannot differ. Pure."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from controller.core.decide.context import Context, Reading, read_spec
from controller.core.decide.decision import Decision
from controller.core.decide.facts import NO_FACTS, Facts
from controller.core.decide.settings import Settings
from controller.core.decide.snapshot import Snapshot
from controller.core.decide.steps import decide_in
from controller.core.jobs.history import Finished
from controller.core.plan import accounting
from controller.core.plan.accounting import Accounting, accounting_of, released
from controller.core.plan.books import books_of
from controller.core.plan.interrupted import Gone, gone_of


@dataclass(frozen=True)
class Decided:
    """The decision part of a pass: the reading of the spec, the bookkeeping (the finished
    Jobs to account, a Job that disappeared, the snapshot as they leave it), the context
    on that view, and DecideOp's decision in it."""

    reading: Reading
    todo: list[Finished]
    accounts: tuple[Accounting, ...]
    gone: Gone | None
    books: Snapshot
    ctx: Context | None
    decision: Decision


def decided(snap: Snapshot, now: datetime, settings: Settings, facts: Facts) -> Decided:
    # The pass's one read of policy and inputs (a module image's with io's lookup).
    reading = read_spec(
        snap, settings.runner, image=facts.image, image_size_limit=settings.image_size_limit
    )
    history = snap.history
    todo = accounting.unaccounted(history)
    accounts = tuple(accounting_of(snap, history, r) for r in todo)
    gone = gone_of(snap, reading.inputs, settings, facts, now)
    books = books_of(snap, todo, gone)
    freed = [w for a in accounts for w in a.releases] + list(gone.releases if gone else ())
    books = replace(books, leases=tuple(released(lease, freed) for lease in books.leases))
    ctx = reading.context(books, now, settings, facts)
    # DecideOp in the pass's context, its holds included (a refused Job, the runner's
    # RBAC, the cached Leases, the image lookup), or the wait of a policy or inputs unusable.
    decision = reading.wait if reading.wait is not None else decide_in(_read(ctx))
    return Decided(reading, todo, accounts, gone, books, ctx, decision)


def decision_of(
    snap: Snapshot, now: datetime, *, settings: Settings | None = None, facts: Facts = NO_FACTS
) -> Decision:
    """The decision the controller carries out for `snap` (`plan_pass(...).decision`, without the
    rest of the plan): what `captf decide` prints, `-f` with no Facts, `--live` with the
    ones it reads."""
    return decided(snap, now, settings or Settings(), facts).decision


def _read(ctx: Context | None) -> Context:
    assert ctx is not None  # no wait: the policy and the inputs were both read
    return ctx
