"""An object's finished Jobs, classified and ordered: the record every count is read from.

There is no counter anywhere: failures, retry numbers and the remediation cap
are all derived from the Jobs that exist, so they survive controller restarts
and need no bookkeeping of their own."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime

from controller.core.basics.names import Op
from controller.core.basics.ops import traits
from controller.core.basics.redact import Redactor
from controller.core.jobs.job import (
    LONG_AGO,
    Classified,
    Outcome,
    classify,
    created_at,
    finished_at,
    is_drift_remediation,
    is_finished,
    op_of,
    result,
    seq_of,
)
from runtime.jsonobj import Json


@dataclass(frozen=True)
class Finished:
    job: Json
    op: str
    at: datetime
    verdict: Classified

    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])

    @property
    def remediation(self) -> bool:
        return is_drift_remediation(self.job)


class History:
    """Finished Jobs of one object, newest first.

    Job times have one-second resolution, so Jobs finishing in the same second are
    ordered by when they were created, then by attempt sequence (one Job runs at a time:
    the later attempt finished later), and only then by name, for determinism. Hashed
    names say nothing about order."""

    def __init__(
        self,
        jobs: Iterable[Json],
        plan_readable: Callable[[Json], bool],
        redactor: Callable[[Json], Redactor] | None = None,
    ) -> None:
        """`redactor` gives the Redactor of a Job's secret values: every verdict message
        (and so every Event and condition built from one) passes through it."""
        records = [_record(job, plan_readable, redactor) for job in jobs if is_finished(job)]
        self._records: list[Finished] = sorted(records, key=_newness, reverse=True)

    def __iter__(self) -> Iterator[Finished]:
        return iter(self._records)

    def of(self, op: str) -> list[Finished]:
        return [r for r in self._records if r.op == op]

    def newest(self, op: str, *, outcome: Outcome | None = None) -> Finished | None:
        for record in self.of(op):
            if outcome is None or record.outcome == outcome:
                return record
        return None

    def failures(self, op: str) -> list[Finished]:
        """The op's counted failures since its newest success, newest first.

        Free outcomes (interrupted, blocked, plan-changed) are skipped: they
        neither count nor end the streak. A restore's failures count too, for its retry
        number; that a restore is never backed off is DecideOp's rule, not the count's."""
        streak: list[Finished] = []
        for record in self.of(op):
            if record.outcome == Outcome.SUCCESS:
                break
            if record.outcome == Outcome.FAILURE:
                streak.append(record)
        return streak

    def remediation_failures(self) -> int:
        """Counted-failure applies since the newest successful drift check, stopping at an
        apply success; blocked and plan-changed applies count nowhere."""
        check = self.newest(Op.DRIFT, outcome=Outcome.SUCCESS)
        count = 0
        for record in self.of(Op.APPLY):
            if check is not None and not _after(record, check):
                break
            if record.outcome == Outcome.SUCCESS:
                break
            if record.outcome == Outcome.FAILURE:
                count += 1
        return count

    def drift_pending(self) -> bool:
        """The newest successful drift check found drift and no apply has succeeded since."""
        check = self.newest(Op.DRIFT, outcome=Outcome.SUCCESS)
        if check is None or not (result(check.job) or {}).get("drift"):
            return False
        applied = self.newest(Op.APPLY, outcome=Outcome.SUCCESS)
        return applied is None or not _after(applied, check)


def finished_after(later: Finished, earlier: Finished) -> bool | None:
    """Whether Job `later` finished after Job `earlier`, of two ops; None when that cannot
    be told.

    Job times have one-second resolution, so a tie in the finish second is broken as
    everywhere in the history: by creation time (one Job runs at a time, so the one
    created later finished later). Attempt sequences are per op and names are hashes:
    across ops they say nothing, so a tie in both times is None, and each caller reads it
    the way that cannot lose a step it owes."""
    later_key = (later.at, created_at(later.job) or LONG_AGO)
    earlier_key = (earlier.at, created_at(earlier.job) or LONG_AGO)
    return None if later_key == earlier_key else later_key > earlier_key


def _after(apply: Finished, check: Finished) -> bool:
    """Whether an apply finished after a drift check.

    A tie in both times is read by what the apply is: a drift remediation is only ever
    created because a check found drift, so it follows the check it ties with; any other
    apply is read as before it. Without the creation time, a drift found in the second of
    the last apply was hidden; without the remediation rule, a remediation failing within
    its check's second went uncounted and the cap allowed one too many."""
    after = finished_after(apply, check)
    return apply.remediation if after is None else after


def _newness(record: Finished) -> tuple[datetime, datetime, int, str]:
    return (record.at, created_at(record.job) or LONG_AGO, seq_of(record.job), record.name)


def _record(
    job: Json,
    plan_readable: Callable[[Json], bool],
    redactor: Callable[[Json], Redactor] | None,
) -> Finished:
    at = finished_at(job) or LONG_AGO  # never None: is_finished held
    op = op_of(job)
    readable = plan_readable(job) if traits(op).result_is_plan else True
    verdict = classify(job, readable)
    if redactor is not None and verdict.message:
        verdict = replace(verdict, message=redactor(job).text(verdict.message))
    return Finished(job=job, op=op, at=at, verdict=verdict)
