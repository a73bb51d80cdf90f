"""docs/decisions.md's table "The guards" is GUARDS: the same guards in the same order,
each with the reasons its wait gives and how long it waits, so adding a wait between a
due op and its Job is one row in the code and one in the page, and neither can be
added alone."""

from __future__ import annotations

import re

from controller.core.decide.guards import GUARDS
from tests.paths import REPO

PAGE = REPO / "docs" / "decisions.md"


def _section(title: str) -> str:
    return PAGE.read_text().split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _rows() -> list[list[str]]:
    lines = [line for line in _section("The guards").splitlines() if re.match(r"\| *\d+ *\|", line)]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_tables_guards_are_the_guards_in_their_order() -> None:
    rows = _rows()
    assert [row[1].strip("`") for row in rows] == [guard.name for guard in GUARDS]
    assert [int(row[0]) for row in rows] == list(range(1, len(rows) + 1))


def test_each_row_names_its_guards_reasons_and_wait() -> None:
    for row, guard in zip(_rows(), GUARDS, strict=True):
        assert set(re.findall(r"`([^`]+)`", row[2])) == set(guard.reasons), guard.name
        if guard.wait is None:
            assert row[3].startswith("computed"), guard.name
        else:
            assert row[3] == f"{guard.wait:g} s", guard.name


def test_the_guards_have_distinct_names() -> None:
    names = [guard.name for guard in GUARDS]
    assert len(names) == len(set(names))
