"""Finding the leader's identity in a replica's log, whatever the log format."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.processes import Incarnation, spawn


@pytest.mark.parametrize(
    "line",
    [
        '{"time":"2026-11-30T23:24:22.822Z","logger":"captf","message":"leading as vm_63dcd1e1"}',
        "2026-11-30 23:05:40,493 INFO captf: leading as vm_63dcd1e1",
    ],
)
def test_the_identity_is_read_from_json_and_text_logs(tmp_path: Path, line: str) -> None:
    log = tmp_path / "controller-a.0.log"
    log.write_text(f"starting\n{line}\nmore\n")
    assert Incarnation(pid=1, log=log, started=0.0).leader_identity() == "vm_63dcd1e1"


def test_no_identity_before_the_line_is_written(tmp_path: Path) -> None:
    log = tmp_path / "controller-a.0.log"
    inc = Incarnation(pid=1, log=log, started=0.0)
    assert inc.leader_identity() == ""
    log.write_text("leading as host_1\n")
    assert inc.leader_identity() == "host_1"


async def test_a_spawned_process_starts_a_fresh_log(tmp_path: Path) -> None:
    # A reused workdir: the log of an earlier run's incarnation with the same name.
    log = tmp_path / "controller-a.0.log"
    log.write_text("leading as old_1\n")
    proc = await spawn(["sh", "-c", "echo leading as new_2"], log, {})
    await proc.wait()
    assert Incarnation(pid=proc.pid, log=log, started=0.0).leader_identity() == "new_2"
