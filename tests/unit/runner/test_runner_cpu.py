"""The runner's CPU line, as `captf bench capi` reads it back from a pod log."""

from __future__ import annotations

import os

import pytest

from controller.runner import cpu


def _times(user: float, system: float, c_user: float, c_system: float) -> os.times_result:
    return os.times_result((user, system, c_user, c_system, 0.0))


@pytest.mark.parametrize(
    ("times", "read"),
    [
        (_times(0.1, 0.02, 0.2, 0.05), (0.12, 0.25)),
        (_times(0.0, 0.0, 0.0, 0.0), (0.0, 0.0)),
        (_times(12.5, 1.25, 300.0, 40.0), (13.75, 340.0)),
    ],
)
def test_the_line_reads_back_as_own_and_tofu_seconds(
    times: os.times_result, read: tuple[float, float]
) -> None:
    log = f"$ tofu version -json\ncaptf-runner: result {{}}\n{cpu.line(times)}\n--- node: exited\n"
    assert cpu.parse(log) == pytest.approx(read, abs=1e-3)


def test_a_log_without_the_line_reads_as_none_and_the_last_line_counts() -> None:
    assert cpu.parse("captf-runner: result {}\n") is None
    two = f"{cpu.line(_times(1, 0, 1, 0))}\n{cpu.line(_times(2, 0, 3, 0))}\n"
    assert cpu.parse(two) == (2.0, 3.0)
