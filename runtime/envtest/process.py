"""Child processes that cannot outlive their parent, and loopback ports for them.

Each child runs in its own process group (so a terminal's Ctrl-C reaches only
us, and we choose the shutdown order) and is killed by the kernel if the thread
that spawned it dies (PR_SET_PDEATHSIG), which covers a parent killed with
SIGKILL, where no Python cleanup runs."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

_PR_SET_PDEATHSIG = 1
# Grace period between SIGTERM and SIGKILL; kube-apiserver drains in about a second.
STOP_GRACE_SECONDS = 10.0


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that were free a moment ago.

    All sockets stay bound until every port is chosen, so the ports differ; the
    window between closing them and the child binding is the usual small race."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when its spawning thread exits."""

    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def spawn(
    argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `argv` with stdout and stderr appended to `log`, in a new process group;
    `env` replaces our environment when given.

    PR_SET_PDEATHSIG fires when the spawning *thread* exits, so it is only armed
    from the main thread: a child spawned from a worker thread (asyncio.to_thread)
    would otherwise die with that worker."""
    preexec = _die_with_parent(os.getpid()) if _on_main_thread() else None
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            process_group=0,
            preexec_fn=preexec,
            close_fds=True,
            env=None if env is None else dict(env),
        )


def stop(proc: subprocess.Popen[bytes], grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM the child's process group, SIGKILL it after `grace` seconds; reaps the child.

    The group is signalled only while its leader is unreaped, so the id cannot
    have been reused by an unrelated process."""
    if proc.poll() is not None:
        return
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt, so `with` blocks unwind
    and children are stopped in order, as on Ctrl-C. Only on the main thread, and
    only when nobody else handles SIGTERM already."""
    if not _on_main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def log_tail(log: Path, lines: int = 20) -> str:
    """The last lines of a log, for error messages."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
