"""docs/decisions.md's table "The order" is DecideOp's STEPS: the same rules in the same
order, each reason named, so the page and the code cannot drift apart."""

from __future__ import annotations

import re

from controller.core.basics.names import Reason
from controller.core.decide import triggers
from controller.core.decide.steps import STEPS
from tests.paths import REPO

PAGE = REPO / "docs" / "decisions.md"


def _rows() -> list[list[str]]:
    text = PAGE.read_text()
    section = text.split("## The order\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if re.match(r"\| *\d+ *\|", line)]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def _step(cell: str) -> str:
    return cell.strip().strip("`")


def test_the_tables_rules_are_the_steps_in_their_order() -> None:
    rows = _rows()
    ours = [_step(row[1]) for row in rows]
    assert ours == [step.__name__ for step in STEPS]
    assert [int(row[0]) for row in rows] == list(range(1, len(rows) + 1))


def test_every_reason_of_a_step_is_in_the_table() -> None:
    """Every reason is named in "The order" or, for the waits between a due op and its
    Job, in "The guards" (test_guards_table.py holds that one)."""
    text = PAGE.read_text()
    named: set[str] = set()
    for title in ("The order", "The guards"):
        section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
        named |= set(re.findall(r"`([A-Z][A-Za-z]+)`", section))
    missing = {r.value for r in Reason} - named
    assert missing == set()


def test_the_health_pending_row_states_the_codes_timing_and_its_restart() -> None:
    # Issue 26, item 4: the row said "doubling with each" while each successful apply
    # restarts the doubling in the code; the row now says which, and this holds the two.
    [row] = [r for r in _rows() if _step(r[1]) == "health_pending"]
    when = row[3]
    first = re.search(r"(\d+) s after the first pending reading", when)
    cap = re.search(r"at most (\d+) min", when)
    assert first is not None
    assert float(first.group(1)) == triggers.HEALTH_PENDING_FIRST
    assert cap is not None
    assert float(cap.group(1)) * 60 == triggers.HEALTH_PENDING_CAP
    assert "since the newest successful apply" in when
    assert "each successful apply starts again at 30 s" in when
