"""The local process: exit codes in container terms, and nothing left behind."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio

from controller.dev.node.process import spawn, terminate
from runtime.clock import LoopClock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_output_goes_to_the_log_and_the_env_is_exactly_the_given_one(tmp_path: Path) -> None:
    log = tmp_path / "a" / "job.log"
    script = (
        "import os; print(sorted(os.environ)); print('to stderr', file=__import__('sys').stderr)"
    )
    process = await spawn([sys.executable, "-c", script], {"ONLY": "1"}, log)
    assert await process.wait() == 0
    text = await anyio.Path(log).read_text()
    assert "'ONLY'" in text
    assert "PATH" not in text
    assert "to stderr" in text


async def test_a_death_by_signal_is_128_plus_the_signal(tmp_path: Path) -> None:
    script = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    process = await spawn([sys.executable, "-c", script], {}, tmp_path / "log")
    assert await process.wait() == 128 + signal.SIGKILL


async def test_what_the_main_process_leaves_in_its_group_is_killed(tmp_path: Path) -> None:
    # The child starts a grandchild in its group and exits at once, as a crashed runner
    # might leave a tofu behind; the end of the "container" takes the grandchild too.
    pidfile = tmp_path / "grandchild"
    script = (
        "import subprocess, sys, pathlib\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"pathlib.Path({str(pidfile)!r}).write_text(str(p.pid))\n"
    )
    process = await spawn([sys.executable, "-c", script], {}, tmp_path / "log")
    assert await process.wait() == 0
    grandchild = int(await anyio.Path(pidfile).read_text())
    # Killed, then reaped by init: nothing to await but the pid's disappearance.
    with anyio.fail_after(10):
        while _alive(grandchild):  # noqa: ASYNC110
            await anyio.sleep(0.01)


async def test_terminate_sends_sigterm_and_returns_the_exit_code(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    script = (
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "time.sleep(600)\n"
    )
    process = await spawn([sys.executable, "-c", script], {}, tmp_path / "log")
    # Signalled only once its handler is installed, which the file announces.
    with anyio.fail_after(10):
        while not await anyio.Path(ready).exists():  # noqa: ASYNC110
            await anyio.sleep(0.01)
    assert await terminate(process, 30, LoopClock()) == 7
