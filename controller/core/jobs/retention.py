"""Which finished Jobs to delete: the retention rules of the history limits.

Only accounted Jobs are ever named (pruning never loses an accounting); the newest
success and the unresolved failures the backoff counts from always stay."""

from __future__ import annotations

from controller.core.jobs.backoff import effective_limit
from controller.core.jobs.history import Finished, History
from controller.core.jobs.job import FREE_OUTCOMES, Outcome, is_accounted


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
    accounted = {r.name for r in history if is_accounted(r.job)}
    return sorted(n for n in doomed if n in accounted and n not in keep)


def _prune_op(records: list[Finished], failed_limit: int, successes_kept: int) -> list[str]:
    limit = effective_limit(failed_limit)
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
