"""The text scanners of the core take time linear in their input, on the inputs that made
their former patterns backtrack (a `\\s*` after a line start over blank lines, a `"` left
open scanned again from every later `"`, a word pattern rescanning a run without digits).

CPU time of this process, the least of three runs, from n to 4n: linear work grows 4 times,
the former patterns 16 (they failed this by far: 0.8 s to 12.7 s for the variable finder)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from controller.core.contract.roles import declares_contract
from controller.core.jobs.run_report import one_line
from controller.core.jobs.sensitive import sensitive_variables
from controller.core.spec.sharding import selector_keys
from controller.lint.typeexpr import TypeSyntaxError, parse_type

GROWTH = 8.0
SLACK = 0.02


def _type(text: str) -> object:
    try:
        return parse_type(text)
    except TypeSyntaxError:
        return None


CASES: dict[str, tuple[Callable[[str], object], str]] = {
    "sensitive variables over blank lines": (lambda t: sensitive_variables({"m.tf": t}), "\n"),
    "sensitive variables over comments": (lambda t: sensitive_variables({"m.tf": t}), " #\n"),
    "sensitive variables over open comments": (lambda t: sensitive_variables({"m.tf": t}), "/*"),
    "contract declaration over blank lines": (lambda t: declares_contract({"m.tf": t}), " \n"),
    "summary with open quotes": (one_line, '"\\'),
    "summary of one long word": (one_line, "a-"),
    "type with open quotes": (_type, '"\\'),
    "selector of spaces": (selector_keys, " "),
}


def _cpu(scan: Callable[[str], object], text: str) -> float:
    spent = []
    for _ in range(3):
        started = time.process_time()
        scan(text)
        spent.append(time.process_time() - started)
    return min(spent)


@pytest.mark.parametrize("case", CASES)
def test_a_scan_grows_linearly(case: str) -> None:
    scan, unit = CASES[case]
    small = _cpu(scan, unit * 5_000 + "!")
    large = _cpu(scan, unit * 20_000 + "!")
    assert large <= GROWTH * small + SLACK, (case, small, large)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('variable "a" {\n\n\n  sensitive = true\n}\n', {"a"}),
        ('variable "a" {\n  validation {\n    sensitive = true\n  }\n}\n', set()),
        ('variable "a" {\n  nested {\n  }\n  sensitive = true\n}\n', {"a"}),
        ('variable "a" { sensitive = true }\nvariable "b" {}\n', {"a"}),
        ('variable "a" {\n}\nsensitive = true\n', set()),
        ('/* variable "a" {\n sensitive = true\n} */\nvariable "b" {\n sensitive = true\n}', {"b"}),
        ('variable "b" {\n sensitive = true\n}\n/* open to the end\nvariable "c" {', {"b"}),
        ('variable "x" {\n  default = "{"\n}\n', set()),
    ],
)
def test_sensitive_variables_are_their_own_blocks_attributes(text: str, found: set[str]) -> None:
    assert sensitive_variables({"m.tf": text}) == found


def test_an_open_quote_in_a_summary_hides_the_rest_of_the_line() -> None:
    assert one_line('Error: bad value "s3cr3t and more') == "Error: bad value …"
