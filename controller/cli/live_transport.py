"""The transport of every command that talks to the live cluster: each request waits out
the API server's momentary trouble, as kubectl does, within `--request-timeout`.

A freshly started or loaded API server answers `429 TooManyRequests: storage is
(re)initializing` (or 503, or refuses connections while it restarts); giving up on the
first such answer makes a script fail for nothing. Here a request whose failure
`runtime.errors.is_transient` calls transient is sent again after the Retry-After the
server asked for, else after a backoff (0.5 s doubling to 8 s), for as long as the
request's time allows: `--request-timeout` counts from its first attempt, and each
attempt's own deadline is cut to what is left. Every wait is one line on stderr, saying
what was answered and how long it waits; stdout stays the command's (`captf state pull`
writes the state there).

A 409 is not sent again: a version conflict or a name that exists is answered the same
way every time, and the command knows what to say of it. Sending a write again is safe
because every write a command makes is a create (a repeat of one that landed is 409
AlreadyExists), carries the resourceVersion it read (a repeat is 409 Conflict), or is a
delete (a repeat is 404): none can land twice."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol

from controller.core.basics.timefmt import TimeFormatError, parse_duration
from runtime.errors import ApiError, is_transient

# How long one request may wait out transient answers when --request-timeout is not
# given: longer than an API server's start on a loaded machine takes (10-30 s), short
# enough that a script on a server that stays down fails within a minute.
DEFAULT_REQUEST_TIMEOUT: Final = 60.0
# Waits between attempts when the server names none: 0.5, 1, 2, 4, 8, 8, ... seconds.
FIRST_WAIT: Final = 0.5
LONGEST_WAIT: Final = 8.0
# A request's own deadline, as runtime.transport gives it.
ATTEMPT_TIMEOUT: Final = 30.0


class Requests(Protocol):
    """What this needs of `runtime.transport.Transport`."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = ATTEMPT_TIMEOUT,  # noqa: ASYNC109 -- a per-request HTTP deadline
        accept: str = "application/json",
    ) -> dict[str, Any]: ...


def worth_waiting(err: BaseException) -> bool:
    """Transient by the one rule, less 409 (see the module's docstring)."""
    return is_transient(err) and not (isinstance(err, ApiError) and err.status == 409)


def wait_after(err: BaseException, attempt: int) -> float:
    """Seconds to wait before attempt `attempt + 1`: the server's Retry-After if it named
    one above 0 (a 0 would make the retries a hot loop), else the backoff."""
    asked = err.retry_after if isinstance(err, ApiError) else None
    if asked:
        return asked
    return float(min(FIRST_WAIT * 2**attempt, LONGEST_WAIT))


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class LiveTransport:
    """A transport whose requests wait out transient answers for at most `limit` seconds
    each. `clock`, `sleep` and `say` are injected: tests run it in virtual time."""

    def __init__(
        self,
        inner: Requests,
        *,
        limit: float = DEFAULT_REQUEST_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        say: Callable[[str], None] = _stderr,
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._clock = clock
        self._sleep = sleep
        self._say = say

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = ATTEMPT_TIMEOUT,  # noqa: ASYNC109 -- a per-request HTTP deadline
        accept: str = "application/json",
    ) -> dict[str, Any]:
        """One request, sent again while it fails transiently and time is left; the last
        failure is raised once it is not."""
        started = self._clock()
        for attempt in itertools.count():
            left = self._limit - (self._clock() - started)
            try:
                return await self._inner.request(
                    method,
                    path,
                    params=params,
                    body=body,
                    content_type=content_type,
                    timeout=max(min(timeout, left), 0.001),
                    accept=accept,
                )
            except Exception as err:
                if not (
                    worth_waiting(err) and self._waits(err, attempt, f"{method} {path}", started)
                ):
                    raise
                await self._sleep(wait_after(err, attempt))
        raise AssertionError("itertools.count() ended")

    def _waits(self, err: Exception, attempt: int, request: str, started: float) -> bool:
        """Whether the request's time allows the wait after `err`; either way, says so."""
        wait, spent = wait_after(err, attempt), self._clock() - started
        what = f"captf: {request}: {_one_line(err)}"
        if spent + wait >= self._limit:
            self._say(f"{what}; giving up after {spent:.0f}s (--request-timeout={self._limit:g}s)")
            return False
        self._say(f"{what}; waiting {wait:g}s (--request-timeout={self._limit:g}s)")
        return True


@asynccontextmanager
async def open_live(kubeconfig: str | None, limit: float) -> AsyncIterator[LiveTransport]:
    """The cluster of `kubeconfig` (None: $KUBECONFIG, ~/.kube/config, in-cluster)."""
    # Imported here: the command line's parser reads this module's flag, and building
    # it must not load aiohttp (`captf decide -f` never talks to a cluster).
    from runtime.transport import open_transport

    async with open_transport(kubeconfig) as transport:
        yield LiveTransport(transport, limit=limit)


def request_timeout(text: str) -> float:
    """--request-timeout: a Go duration as kubectl takes it (`30s`, `2m`), or seconds."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text)
        except TimeFormatError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give the time a request may wait out the API server's trouble, "
            "above 0 (e.g. 30s, 2m)"
        )
    return seconds
