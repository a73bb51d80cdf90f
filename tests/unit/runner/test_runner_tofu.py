"""TofuRunner against a stand-in `tofu` executable (a Python script): output
streaming, capture, the stderr tail, and SIGTERM forwarded exactly once."""

from __future__ import annotations

import asyncio
import io
import stat
import sys
from pathlib import Path

from controller.core.basics.cut import VALUE_BYTES
from controller.core.basics.redact import redactor
from controller.runner.tofu import STDERR_TAIL, TofuRunner

SCRIPT = """\
import os, signal, sys, time
args = sys.argv[1:]
if args[0] == "env":
    print(os.environ.get("TF_CLI_CONFIG_FILE"), os.environ.get("CHECKPOINT_DISABLE"), os.getcwd())
elif args[0] == "noisy":
    sys.stderr.write("x" * 20000 + "\\nError: the end\\n")
    sys.exit(3)
elif args[0] == "huge":
    value = "v" * (10 << 20)
    print(f'  ~ content = "{value}" -> "{value}"', flush=True)
    print("Apply complete!")
elif args[0] == "wait":
    got = []
    signal.signal(signal.SIGTERM, lambda *_: got.append(1))
    print("ready", flush=True)
    while not got:
        signal.pause()
    time.sleep(0.2)  # a second SIGTERM, if one were sent, would arrive meanwhile
    print(f"stopping after {len(got)} SIGTERM", flush=True)
    sys.exit(1)
else:
    print("out:" + " ".join(args))
    sys.stderr.write("err line\\n")
"""


def fake_tofu(tmp_path: Path) -> str:
    path = tmp_path / "tofu"
    path.write_text(f"#!{sys.executable}\n{SCRIPT}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def test_streams_output_and_keeps_stderr(tmp_path: Path) -> None:
    log = io.BytesIO()
    runner = TofuRunner(fake_tofu(tmp_path), str(tmp_path), log=log)
    ex = await runner.run("plan", "-no-color")
    assert ex.code == 0
    assert ex.stderr == "err line\n"
    assert b"$ tofu plan -no-color\n" in log.getvalue()
    assert b"out:plan -no-color\n" in log.getvalue()
    assert b"err line\n" in log.getvalue()


async def test_capture_returns_stdout_instead_of_logging_it(tmp_path: Path) -> None:
    log = io.BytesIO()
    runner = TofuRunner(fake_tofu(tmp_path), str(tmp_path), log=log)
    ex = await runner.run("show", "-json", capture=True)
    assert ex.stdout == b"out:show -json\n"
    assert b"out:show" not in log.getvalue()


async def test_environment_and_working_directory(tmp_path: Path) -> None:
    runner = TofuRunner(
        fake_tofu(tmp_path), str(tmp_path), cli_config="/etc/tofurc", environ={"PATH": "/bin"}
    )
    ex = await runner.run("env", capture=True)
    assert ex.stdout.decode().split() == ["/etc/tofurc", "1", str(tmp_path)]


async def test_stderr_tail_is_bounded_and_keeps_the_end(tmp_path: Path) -> None:
    runner = TofuRunner(fake_tofu(tmp_path), str(tmp_path), log=io.BytesIO())
    ex = await runner.run("noisy")
    assert ex.code == 3
    assert ex.stderr.endswith("Error: the end\n")
    assert len(ex.stderr) < STDERR_TAIL + 65536


async def test_a_huge_value_is_cut_in_the_log(tmp_path: Path) -> None:
    log = io.BytesIO()
    runner = TofuRunner(
        fake_tofu(tmp_path), str(tmp_path), log=log, redactor=redactor(["hunter22"])
    )
    ex = await runner.run("huge")
    assert ex.code == 0
    printed = log.getvalue()
    assert len(printed) < 10_000  # of 20 MiB
    kept = "v" * VALUE_BYTES
    cut = (10 << 20) - VALUE_BYTES
    assert f'~ content = "{kept}... ({cut} bytes cut)" -> "{kept}... ({cut} bytes cut)"' in (
        printed.decode()
    )
    assert printed.endswith(b"Apply complete!\n")


async def test_missing_binary_is_an_exit_not_an_exception(tmp_path: Path) -> None:
    runner = TofuRunner(str(tmp_path / "absent"), str(tmp_path), log=io.BytesIO())
    ex = await runner.run("init")
    assert ex.code == 127
    assert "absent" in ex.stderr


class WatchedLog(io.BytesIO):
    """A log that says when a line has appeared in it."""

    def __init__(self, line: bytes) -> None:
        super().__init__()
        self.line = line
        self.seen = asyncio.Event()

    def write(self, data: bytes) -> int:  # type: ignore[override]
        written = super().write(data)
        if self.line in self.getvalue():
            self.seen.set()
        return written


async def test_terminate_forwards_one_sigterm_and_refuses_later_commands(tmp_path: Path) -> None:
    log = WatchedLog(b"ready")
    runner = TofuRunner(fake_tofu(tmp_path), str(tmp_path), log=log)
    task = asyncio.create_task(runner.run("wait"))
    await log.seen.wait()
    runner.terminate()
    runner.terminate()
    ex = await task
    assert ex.code == 1
    assert b"stopping after 1 SIGTERM" in log.getvalue()
    assert runner.terminated
    later = await runner.run("apply")
    assert later.code != 0
    assert b"out:apply" not in log.getvalue()
