"""A process's request to stop: set once, by SIGTERM or SIGINT or by a caller.

Kubernetes stops a pod with SIGTERM and, `terminationGracePeriodSeconds` later,
SIGKILL; a person stops a process with Ctrl-C (SIGINT). Both mean the same here:
take no new work, let the work in flight finish briefly, give up what others are
waiting for (a leader Lease), exit 0. Python's default for SIGTERM kills the
process on the spot, and for SIGINT raises KeyboardInterrupt wherever the main
thread happens to be; `stop_on_signals` replaces both with setting the request.

    stop = StopRequest()
    with stop_on_signals(stop):
        await serve(stop=stop)"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Waited for (`wait`), polled (`is_set`), or told to call back (`calls`).

    Setting it is synchronous, so a signal handler can do it."""

    def __init__(self) -> None:
        self._event = anyio.Event()
        # Called once, when the request is set; one registered after that is called
        # on registration instead.
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        if self._event.is_set():
            return
        self._event.set()
        for callback in self._callbacks:
            callback()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()

    @contextmanager
    def calls(self, callback: Callable[[], None]) -> Iterator[None]:
        """While the block runs, setting the request calls `callback` (at once if already
        set), e.g. a cancel scope's `cancel`."""
        if self.is_set():
            callback()
        self._callbacks.append(callback)
        try:
            yield
        finally:
            self._callbacks.remove(callback)


@contextmanager
def stop_on_signals(stop: StopRequest) -> Iterator[StopRequest]:
    """SIGTERM and SIGINT set `stop` while the block runs (in the running asyncio loop)."""
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, _received, signum, stop)
    try:
        yield stop
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


def _received(signum: int, stop: StopRequest) -> None:
    if not stop.is_set():
        log.info("%s received: stopping", signal.Signals(signum).name)
    stop.set()
