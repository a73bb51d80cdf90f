"""Long-lived tasks whose failure is theirs alone.

    tg.start_soon(supervised, "timeline", timeline.run, clock)

A task started in a task group that raises cancels the group: every sibling, and
whatever the group belongs to, ends with it. `supervised` stands between: an exception
of the task is logged with the task's name and its traceback, and the task alone is
started again after a delay (doubling from FIRST_DELAY to MAX_DELAY, back to the first
after a run that lasted MAX_DELAY), or, with `restart=False`, ended. A task that returns
has ended as it meant to. Cancellation is not an error and passes through."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from runtime.clock import Clock

log = logging.getLogger(__name__)

FIRST_DELAY = 1.0
MAX_DELAY = 30.0


async def supervised(
    name: str,
    task: Callable[[], Awaitable[None]],
    clock: Clock,
    *,
    restart: bool = True,
) -> None:
    """Runs `task` until it returns or is cancelled; see the module's docstring."""
    delay = FIRST_DELAY
    while True:
        started = clock.monotonic()
        try:
            await task()
            return
        except Exception:
            if not restart:
                log.exception("%s failed; it is ended, the rest goes on", name)
                return
            if clock.monotonic() - started >= MAX_DELAY:
                delay = FIRST_DELAY  # it ran a while: a new failure, not the same one
            log.exception("%s failed; starting it again in %.0fs", name, delay)
        await clock.sleep(delay)
        delay = min(delay * 2, MAX_DELAY)
