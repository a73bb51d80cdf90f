"""Every op has one row in the core's table of operations (controller/core/basics/ops.py)
and one in the runner's table of steps (controller/runner/ops.py): adding an op to `Op`
without both rows fails here. And the rules that treat ops differently read the table."""

from __future__ import annotations

from controller.core.basics.names import Op
from controller.core.basics.ops import OPS, traits
from controller.core.jobs import backoff
from controller.runner.ops import RUNNER_OPS


def test_every_op_has_one_row_in_the_core_table() -> None:
    assert sorted(row.op for row in OPS) == sorted(Op)


def test_every_op_has_a_row_of_runner_steps() -> None:
    assert set(RUNNER_OPS) == set(Op)


def test_the_runner_prepares_a_work_directory_for_every_op_that_runs_the_module() -> None:
    for op, row in RUNNER_OPS.items():
        assert row.prepares == traits(op).runs_module, op


def test_a_name_that_is_no_op_has_no_trait() -> None:
    row = traits("")
    assert not any(
        (
            row.background,
            row.windowed,
            row.backs_off,
            row.writes_state,
            row.runs_module,
            row.keeps_plan,
            row.result_is_plan,
            row.looks_up_image,
            row.success_event,
        )
    )


def test_the_retry_cap_names_the_ops_that_back_off_in_the_tables_order() -> None:
    """The order the retry-capped label names a capped op in, as it was before the table."""
    order = (Op.APPLY, Op.DESTROY, Op.PLAN, Op.DRIFT, Op.REFRESH)
    assert order == backoff._OP_ORDER


def test_background_ops_change_nothing_anyone_asked_for() -> None:
    """The background ops are the scheduled checks; none of them waits for a window."""
    background = {row.op for row in OPS if row.background}
    assert background == {Op.DRIFT, Op.REFRESH}
    assert not any(traits(op).windowed for op in background)
