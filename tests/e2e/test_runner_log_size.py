"""A module with a 10 MiB attribute, applied and then updated by the runner with the real
OpenTofu: what the runner prints (its pod log) stays a few KiB, each long value cut with
how much was left out, while the state keeps the value whole."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.core.basics.cut import VALUE_BYTES
from controller.core.jobs.job import Outcome
from tests.e2e.test_runner_tofu import Object

pytestmark = pytest.mark.e2e

MIB10 = 10 << 20
# terraform_data keeps its input as its output: an update's diff shows the value three
# times (input before and after, output before), as a cloud resource's attribute would.
MODULE = """\
variable "dir" {
  type = string
}
variable "note" {
  type = string
}
locals {
  kib = format("%01024d", 0)
  mib = join("", [for i in range(1024) : local.kib])
}
resource "terraform_data" "big" {
  input = "${var.note}${join("", [for i in range(10) : local.mib])}"
}
"""
CUT = re.compile(r"\.\.\. \((\d+) bytes cut\)")


async def test_a_ten_mebibyte_attribute_leaves_a_small_log(
    tofu_build: Path, tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    obj = Object(tofu_build, tmp_path, module=MODULE)
    obj.set_inputs(note="a")
    created = await obj.run("apply")
    assert created.outcome is Outcome.SUCCESS, created.message
    first = capfdbinary.readouterr()
    obj.set_inputs(note="b")
    updated = await obj.run("apply")
    assert updated.outcome is Outcome.SUCCESS, updated.message
    second = capfdbinary.readouterr()

    # The state holds the value whole.
    [big] = obj.state()["resources"]
    assert big["instances"][0]["attributes"]["input"]["value"] == "b" + "0" * MIB10

    for printed, shown in ((first, 1), (second, 3)):
        log = (printed.out + printed.err).decode()
        # A plan and an apply of it, with a few KiB of each value: not 10 or 30 MiB.
        assert len(log) < 64 * 1024, len(log)
        cuts = [int(n) for n in CUT.findall(log)]
        assert cuts == [MIB10 + 1 - VALUE_BYTES] * shown, log
    # The diff still reads as one: the start of each value, before and after.
    update = r'~ input\s+= "a0{4095}\.\.\. \(\d+ bytes cut\)" -> "b0{4095}\.\.\. \(\d+ bytes cut\)"'
    assert re.search(update, second.out.decode())
