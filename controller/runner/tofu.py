"""Running `tofu`: its output streamed to the pod log (redacted, then long values cut),
its stderr's tail kept for the result message, and SIGTERM forwarded to it exactly once.

tofu runs in a session of its own, so a signal sent to the runner's process
group (a terminal's Ctrl-C, a local executor) reaches it only through
`terminate()`: tofu treats a second interrupt as "exit now, lose state", so it
must get one. On its one SIGTERM, tofu stops gracefully and writes the state
it has."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

from controller.core.basics.cut import StreamCutter
from controller.core.basics.redact import Redactor, StreamRedactor

# Bytes of stderr kept per command: more than the result message holds, so the
# message can drop blank lines and still fill its budget.
STDERR_TAIL = 8192

# Environment for every tofu command: no prompts, no colour codes in the log,
# and no version check over the network.
TOFU_ENV = {"TF_IN_AUTOMATION": "1", "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1"}


@dataclass(frozen=True)
class Exit:
    code: int
    stderr: str  # the tail of stderr, for messages
    stdout: bytes = b""  # only with capture=True


class TofuRunner:
    """Runs tofu commands one at a time in `work_dir`."""

    def __init__(
        self,
        binary: str,
        work_dir: str,
        *,
        cli_config: str | None = None,
        environ: Mapping[str, str] | None = None,
        log: BinaryIO | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        """Output is redacted by `redactor` before it reaches the log or a message."""
        self._binary = binary
        self._work_dir = work_dir
        self._env = {**(os.environ if environ is None else environ), **TOFU_ENV}
        if cli_config:
            self._env["TF_CLI_CONFIG_FILE"] = cli_config
        self._log = log if log is not None else sys.stdout.buffer
        self._redactor = redactor if redactor is not None else Redactor(frozenset())
        self._proc: asyncio.subprocess.Process | None = None
        self._terminated = False

    @property
    def terminated(self) -> bool:
        """True once termination was requested: no further command starts."""
        return self._terminated

    def terminate(self) -> None:
        """Asks the running command (if any) to stop, once; later commands are refused."""
        if self._terminated:
            return
        self._terminated = True
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGTERM)

    async def run(self, *args: str, capture: bool = False) -> Exit:
        """`tofu <args>`; with capture, stdout is returned instead of logged."""
        if self._terminated:
            return Exit(-int(signal.SIGTERM), "not started: the runner is terminating")
        self._write(f"$ tofu {' '.join(args)}\n".encode())
        try:
            proc = await asyncio.create_subprocess_exec(
                self._binary,
                *args,
                cwd=self._work_dir,
                env=self._env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return Exit(127, f"cannot run {self._binary}: {exc}")
        self._proc = proc
        assert proc.stdout is not None
        assert proc.stderr is not None
        tail: deque[bytes] = deque()
        captured: list[bytes] = []
        try:
            await asyncio.gather(
                self._pump(proc.stdout, captured if capture else None),
                self._pump(proc.stderr, None, tail),
            )
            code = await proc.wait()
        finally:
            self._proc = None
        return Exit(code, b"".join(tail).decode("utf-8", "replace"), b"".join(captured))

    async def _pump(
        self,
        stream: asyncio.StreamReader,
        capture: list[bytes] | None,
        tail: deque[bytes] | None = None,
    ) -> None:
        # Captured output is data (a plan's JSON), never written anywhere as text. What
        # is printed is redacted, then cut: the cut leaves out bytes of text in which
        # every secret value is already replaced whole, so it cannot keep part of one.
        size = 0
        redacting, cutting = StreamRedactor(self._redactor), StreamCutter()
        while True:
            chunk = await stream.read(65536)
            if capture is not None:
                if not chunk:
                    break
                capture.append(chunk)
                continue
            if chunk:
                released = cutting.feed(redacting.feed(chunk))
            else:
                released = cutting.feed(redacting.flush()) + cutting.flush()
            self._write(released)
            if tail is not None and released:
                tail.append(released)
                size += len(released)
                while size - len(tail[0]) >= STDERR_TAIL:
                    size -= len(tail.popleft())
            if not chunk:
                break

    def _write(self, data: bytes) -> None:
        self._log.write(data)
        self._log.flush()
