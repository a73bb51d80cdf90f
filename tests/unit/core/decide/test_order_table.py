"""docs/decisions.md's table "The order" is DecideOp's STEPS: the same rules in the same
order, each reason named, so the page and the code cannot drift apart."""

from __future__ import annotations

import re

from controller.core.basics.names import Reason
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
    section = PAGE.read_text().split("## The order\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", section))
    missing = {r.value for r in Reason} - named
    assert missing == set()
