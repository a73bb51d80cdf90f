"""The delay after consecutive failures of one op.

`L = max(failedJobsHistoryLimit, 1)`. After n >= 1 failures the delay is the cap
when n >= L, else min(base * 2^(n-1), cap), counted from when the newest failed
Job finished. Pruning keeps at most L failures, so n >= L means "at least L"."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.core.basics.names import BACKOFF_BASE, BACKOFF_CAP
from controller.core.basics.ops import OPS
from controller.core.jobs.history import History


def effective_limit(failed_jobs_history_limit: int) -> int:
    """A limit of 0 behaves as 1: pruning always keeps the newest unresolved failure."""
    return max(failed_jobs_history_limit, 1)


def delay(failures: int, limit: int) -> float:
    """Seconds to wait after `failures` consecutive failures; 0 when there are none."""
    if failures <= 0:
        return 0.0
    if failures >= effective_limit(limit):
        return BACKOFF_CAP
    # The exponent is clamped: past 2**32 the product is far above the cap anyway, and
    # an unclamped 2.0 ** n overflows a float near n = 1024 (a large limit allows that n).
    return min(BACKOFF_BASE * 2.0 ** min(failures - 1, 32), BACKOFF_CAP)


def retry_at(history: History, op: str, limit: int) -> datetime | None:
    """When the op may run again, or None when it has no failures to wait out."""
    streak = history.failures(op)
    if not streak:
        return None
    return streak[0].at + timedelta(seconds=delay(len(streak), limit))


def retry_number(history: History, op: str) -> int:
    """1 + the op's counted failures since its last success."""
    return 1 + len(history.failures(op))


# The order in which a capped op names the object's retry-capped label.
_OP_ORDER = tuple(row.op for row in OPS if row.backs_off)


@dataclass(frozen=True)
class Capped:
    op: str
    reached_by: str  # the Job whose failure brought the streak to the limit: names the streak


def capped(history: History, failed_limit: int) -> Capped | None:
    """The first op (in a fixed order) whose failure streak has reached the limit."""
    limit = effective_limit(failed_limit)
    for op in _OP_ORDER:
        streak = history.failures(op)
        if len(streak) >= limit:
            # streak is newest first; the limit-th oldest failure reached the cap.
            return Capped(op=op, reached_by=streak[len(streak) - limit].name)
    return None
