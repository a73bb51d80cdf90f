"""The controller worker loop (controller-runtime's reconcile handling).

A reconciler is told only a key ("namespace/name"): level-based, it reads the
current state itself. What happened is turned into an outcome, data, and one
`match` turns each outcome into queue actions, so the retry policy reads in one
place:

    done                 -> forget the failures
    requeue after t      -> forget the failures, add after t
    requeue              -> add through the rate limiter
    transient error      -> add through the rate limiter, no sooner than Retry-After
    unrecognised error   -> log, report, count, add after the rate limiter's cap

Only errors `runtime.errors.is_transient` recognises are retried quickly; any
other error waits the cap, so a bug or a bad object cannot hot-loop."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from runtime import logs
from runtime.clock import Clock
from runtime.errors import ApiError, is_transient
from runtime.workqueue import DEFAULT_MAX_DELAY, SHUTDOWN, RateLimitingQueue

log = logging.getLogger(__name__)

# An error report (a Warning Event) is best effort: a slow API server must not hold
# a worker, and the key is retried either way.
REPORT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks of the queue; the default means done."""

    requeue_after: float | None = None  # Come back after this many seconds, failures forgotten.
    requeue: bool = False  # Come back after the rate limiter's delay (no error to report).


DONE = Result()


def requeue_after(seconds: float) -> Result:
    return Result(requeue_after=seconds)


class Reconciler(Protocol):
    async def reconcile(self, key: str) -> Result: ...


class ErrorReporter(Protocol):
    async def unrecognized_error(self, key: str, error: Exception) -> None:
        """Told of an error no retry rule recognises, e.g. to emit a Warning Event."""
        ...


class ReconcileObserver(Protocol):
    """Told of each reconcile; runtime/metrics.py records it."""

    def reconciled(self, result: str, seconds: float) -> None:
        """`result` is one of success, error, requeue, requeue_after."""
        ...

    def unrecognized_error(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Done:
    pass


@dataclass(frozen=True, slots=True)
class RequeueAfter:
    seconds: float


@dataclass(frozen=True, slots=True)
class RateLimited:
    pass


@dataclass(frozen=True, slots=True)
class Transient:
    error: Exception
    at_least: float  # The server's Retry-After, or 0.


@dataclass(frozen=True, slots=True)
class Unrecognized:
    error: Exception


Disposition = Done | RequeueAfter | RateLimited | Transient | Unrecognized


def outcome_of(result: Result | Exception) -> Disposition:
    """Classify what a reconcile returned or raised. Pure."""
    if isinstance(result, Exception):
        if not is_transient(result):
            return Unrecognized(result)
        retry_after = result.retry_after if isinstance(result, ApiError) else None
        return Transient(result, retry_after or 0.0)
    if result.requeue_after is not None:
        return RequeueAfter(result.requeue_after)
    if result.requeue:
        return RateLimited()
    return Done()


def apply_outcome(
    queue: RateLimitingQueue[str], key: str, outcome: Disposition, *, error_delay: float
) -> str:
    """Turn `outcome` into queue actions for `key`; returns the metric's result label."""
    match outcome:
        case Done():
            queue.forget(key)
            return "success"
        case RequeueAfter(seconds):
            queue.forget(key)
            queue.add_after(key, seconds)
            return "requeue_after"
        case RateLimited():
            queue.add_rate_limited(key)
            return "requeue"
        case Transient(error, at_least):
            delay = queue.add_rate_limited(key, at_least=at_least)
            log.info("reconcile %s: transient error, retry in %.3gs: %s", key, delay, error)
            return "error"
        case Unrecognized(error):
            # The failure count is kept: a later transient error continues the backoff.
            queue.add_after(key, error_delay)
            log.error(
                "reconcile %s: unrecognised error, retry in %.0fs",
                key,
                error_delay,
                exc_info=error,
            )
            return "error"


def key_fields(key: str) -> Mapping[str, Any]:
    """Log fields of a key: `namespace/name` as client-go writes keys, else the key as is."""
    namespace, _, name = key.rpartition("/")
    if namespace and "/" not in namespace:
        return {"object": {"namespace": namespace, "name": name}}
    return {"key": key}


class NoObserver:
    def reconciled(self, result: str, seconds: float) -> None:
        pass

    def unrecognized_error(self) -> None:
        pass


class Controller:
    """N workers reconciling keys from one rate-limiting queue.

    The queue never hands a key to two workers, so reconciles of one key never
    overlap. `run` returns once the queue is shut down and drained, or once `stop`
    is called and the reconciles in flight have finished; cancel it to stop at once."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        queue: RateLimitingQueue[str],
        *,
        clock: Clock,
        workers: int = 1,
        observer: ReconcileObserver | None = None,
        reporter: ErrorReporter | None = None,
        error_delay: float = DEFAULT_MAX_DELAY,
        log_fields: Callable[[str], Mapping[str, Any]] = key_fields,
    ) -> None:
        if workers < 1:
            raise ValueError(f"need at least one worker, got {workers}")
        self.name = name
        self.queue = queue
        self._reconciler = reconciler
        self._clock = clock
        self._workers = workers
        self._observer: ReconcileObserver = observer or NoObserver()
        self._reporter = reporter
        self._error_delay = error_delay
        # The object a key names, for every log record of its reconcile.
        self._log_fields = log_fields
        # Once set, no worker takes another key; the keys still queued are left there.
        self._stopping = False

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            for i in range(self._workers):
                tg.start_soon(self._worker, name=f"{self.name} worker {i}")

    def stop(self) -> None:
        """Take no more keys: each worker finishes the reconcile it is in, then `run` returns."""
        self._stopping = True
        self.queue.shut_down()  # Wakes the workers waiting in `get`.

    async def _worker(self) -> None:
        while not self._stopping and (key := await self.queue.get()) is not SHUTDOWN:
            try:
                if not self._stopping:  # `stop` may have come while `get` was waking up.
                    await self._process(key)
            finally:
                self.queue.done(key)

    async def _process(self, key: str) -> None:
        context = {"controller": self.name, **self._log_fields(key)}
        with logs.bound(**context, reconcileID=logs.new_reconcile_id()):
            await self._reconcile(key)

    async def _reconcile(self, key: str) -> None:
        start = self._clock.monotonic()
        result: Result | Exception
        try:
            result = await self._reconciler.reconcile(key)
        except Exception as error:  # Cancellation is a BaseException and passes through.
            result = error
        outcome = outcome_of(result)
        label = apply_outcome(self.queue, key, outcome, error_delay=self._error_delay)
        self._observer.reconciled(label, self._clock.monotonic() - start)
        if isinstance(outcome, Unrecognized):
            self._observer.unrecognized_error()
            await self._report(key, outcome.error)

    async def _report(self, key: str, error: Exception) -> None:
        if self._reporter is None:
            return
        try:
            with anyio.fail_after(REPORT_TIMEOUT):
                await self._reporter.unrecognized_error(key, error)
        except Exception:
            log.warning("reconcile %s: reporting the error failed", key, exc_info=True)
