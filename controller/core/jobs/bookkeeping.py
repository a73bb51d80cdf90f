"""Bookkeeping decisions: which finished Jobs to account, which to prune, which op is capped.

Pure: the reconciler reads these and performs the writes. The `captf.io/accounted`
annotation on a Job is the only record that it was counted, so accounting is
exactly once across restarts and replicas."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.basics.names import ANN_ACCOUNTED, ANN_RETRY, Op
from controller.core.basics.serials import serial_of
from controller.core.jobs import backoff
from controller.core.jobs.history import Finished, History
from controller.core.jobs.job import FREE_OUTCOMES, Outcome, annotations_of

# The order in which a capped op names the object's retry-capped label.
_OP_ORDER = (Op.APPLY, Op.DESTROY, Op.PLAN, Op.DRIFT, Op.REFRESH)


def unaccounted(history: History) -> list[Finished]:
    """Finished Jobs not yet accounted, oldest first (Events read in order)."""
    return [r for r in reversed(list(history)) if not is_accounted(r)]


def is_accounted(record: Finished) -> bool:
    return annotations_of(record.job).get(ANN_ACCOUNTED) == "true"


def attempt_number(history: History, record: Finished) -> int:
    """The Job's retry number: 1 + the op's counted failures before it since the last success.

    The number stamped on the Job at creation wins: it was computed from the
    Jobs of that moment, before pruning could remove any."""
    stamped = serial_of(annotations_of(record.job).get(ANN_RETRY))
    if stamped:
        return stamped
    earlier = 0
    records = history.of(record.op)  # newest first: the ones after it came before it
    before = records[records.index(record) + 1 :] if record in records else records
    for other in before:
        if other.at > record.at:
            continue
        if other.outcome == Outcome.SUCCESS:
            break
        earlier += other.outcome == Outcome.FAILURE
    return 1 + earlier


@dataclass(frozen=True)
class Capped:
    op: str
    reached_by: str  # the Job whose failure brought the streak to the limit: names the streak


def capped(history: History, failed_limit: int) -> Capped | None:
    """The first op (in a fixed order) whose failure streak has reached the limit."""
    limit = backoff.effective_limit(failed_limit)
    for op in _OP_ORDER:
        streak = history.failures(op)
        if len(streak) >= limit:
            # streak is newest first; the limit-th oldest failure reached the cap.
            return Capped(op=op, reached_by=streak[len(streak) - limit].name)
    return None


def prune(
    history: History,
    *,
    failed_limit: int,
    successful_limit: int,
    keep: frozenset[str] = frozenset(),
) -> list[str]:
    """Names of finished, accounted Jobs to delete.

    Per op: the newest `successful_limit` successes stay (at least one: the
    newest success anchors the failure count and the schedules); failures older
    than the newest success are resolved and go; of the unresolved failures the
    newest L stay (L at least 1, so the newest unresolved failure always stays);
    of the free outcomes, the newest of each kind stays (a blocked apply waits
    for its approval). `keep` names Jobs that must stay whatever their age."""
    doomed: list[str] = []
    for op in {r.op for r in history}:
        doomed += _prune_op(history.of(op), failed_limit, max(successful_limit, 1))
    accounted = {r.name for r in history if is_accounted(r)}
    return sorted(n for n in doomed if n in accounted and n not in keep)


def _prune_op(records: list[Finished], failed_limit: int, successes_kept: int) -> list[str]:
    limit = backoff.effective_limit(failed_limit)
    doomed: list[str] = []
    successes = failures = 0
    seen_success = False
    seen_free: set[Outcome] = set()
    for record in records:  # newest first
        if record.outcome == Outcome.SUCCESS:
            successes += 1
            seen_success = True
            if successes > successes_kept:
                doomed.append(record.name)
        elif record.outcome in FREE_OUTCOMES:
            if record.outcome in seen_free:
                doomed.append(record.name)
            seen_free.add(record.outcome)
        elif seen_success:
            doomed.append(record.name)
        else:
            failures += 1
            if failures > limit:
                doomed.append(record.name)
    return doomed


def event_name(job: str, uid: str, reason: str) -> str:
    """One Event per Job incarnation: a Job deleted and created again under the same name
    (an operator forgot a failure, so the attempt repeats) is a new object with a new uid,
    and gets its own Event."""
    return f"{job}.{uid}.{reason.lower()}" if uid else f"{job}.{reason.lower()}"
