"""The operations, one row each: what the core needs to know of an op besides its name.

Every rule that treats ops differently reads its column here (the guards, the backoff,
the accounting, the Job's environment, the image lookup, the reading of a result)
rather than naming ops itself; the runner's steps for each op are the other table,
controller/runner/ops.py. A new op is a member of `Op` (names.py), a row here and a
row there; tests/unit/core/basics/test_ops_table.py fails while one is missing.

Every op takes the same Leases (a run slot, its cluster family's operation Lease, a
member's own; controller/core/decide/claims.py): one Job of a family runs at a time,
whatever its op, so the table has no column for them. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.core.basics.names import Op


@dataclass(frozen=True)
class OpTraits:
    op: Op
    # A check the controller starts on its own schedule (drift, refresh), as opposed to a
    # change someone asked for (new inputs, an approval, a deletion, a restore).
    background: bool
    # It changes infrastructure: it starts only inside a change window.
    windowed: bool
    # Its failures delay its next attempt, and count towards the retry cap; a restore is
    # tried once per serial instead.
    backs_off: bool
    # Its Job leaves a state that says what exists (a destroy's says nothing does): the
    # accounting marks the inputs Secret it ran with as applied.
    writes_state: bool
    # It runs the module, so its Job carries the durable inputs Secret (a restore only
    # copies a backup).
    runs_module: bool
    # Its Job is given a plan Secret to write (a plan; an apply, for the plan it stops on).
    keeps_plan: bool
    # Its result is a plan: a success counts only while its plan Secret can be read.
    result_is_plan: bool
    # Its module image is looked up before it runs (controller/core/decide/pinning.py).
    looks_up_image: bool
    # The reason of the Event a success announces (accounting.py refines an apply's and a
    # drift check's); None: a success says nothing.
    success_event: str | None


# In the order a capped op names the object's retry-capped label. The columns:
# background, windowed, backs_off, writes_state, runs_module, keeps_plan, result_is_plan,
# looks_up_image, success_event.
OPS: Final[tuple[OpTraits, ...]] = (
    OpTraits(Op.APPLY, False, True, True, True, True, True, False, True, "Applied"),
    OpTraits(Op.DESTROY, False, True, True, False, True, False, False, False, "Destroyed"),
    OpTraits(Op.PLAN, False, False, True, False, True, True, True, True, "PlanReady"),
    OpTraits(Op.DRIFT, True, False, True, False, True, False, False, True, "DriftDetected"),
    OpTraits(Op.REFRESH, True, False, True, True, True, False, False, False, None),
    OpTraits(Op.RESTORE, False, False, False, True, False, False, False, False, "Restored"),
)
_BY_OP: Final = {str(row.op): row for row in OPS}
# A name that is no op (a Job whose op label and name say none): no trait holds.
_NO_OP: Final = OpTraits(
    Op(OPS[0].op), False, False, False, False, False, False, False, False, None
)


def traits(op: str) -> OpTraits:
    """The row of `op`; for a name that is no op, a row in which no trait holds."""
    return _BY_OP.get(op, _NO_OP)
