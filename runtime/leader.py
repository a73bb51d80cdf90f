"""Leader election on a coordination.k8s.io/v1 Lease (client-go `leaderelection`).

Usage:

    async with leader_election(api, namespace=ns, name="my-controller", clock=clock):
        ...  # runs only while this process holds the Lease

Entering the block waits until the Lease is ours. If it cannot be renewed
within the renew deadline (or another holder shows up), the block is cancelled
and `LeaderLost` is raised: the caller must exit, since another process may
already be writing. Leaving the block normally releases the Lease so a standby
takes over at once instead of waiting out the lease duration.

Whether to take the Lease is the pure function `next_action`; the elector only reads,
decides and writes. Writes carry the resourceVersion read, so of two candidates
racing for a free Lease exactly one wins and the other gets 409 Conflict.

The Lease's times are compared against this process's wall clock, so candidates
need clocks in step to well within the renew margin (lease duration minus renew
deadline, 5 s by default); give the elector an unscaled clock.

A standby polls every retry period, and between polls watches the Lease: seeing it
released (a leader that stopped cleanly) it polls at once, so a clean handover
takes a round trip instead of up to a jittered retry period."""

from __future__ import annotations

import logging
import math
import random
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import orjson

from runtime.clock import Clock
from runtime.errors import ApiError, is_transient
from runtime.lease import Create, LeaseSpec, Update, Wait, next_action, released

log = logging.getLogger(__name__)

# The defaults of controller-runtime's manager, with their reasons:
# 15 s lease: how long a crashed leader's Lease blocks a standby; shorter means more
# API writes from every candidate and more risk of a slow (not dead) leader losing it.
LEASE_DURATION = 15.0
# 10 s renew deadline: a leader that has not renewed for this long stops acting, 5 s
# before the Lease can be taken, so two leaders never act at once (given clocks in step).
RENEW_DEADLINE = 10.0
# 2 s retry: a renew that fails can be retried several times within the renew deadline.
RETRY_PERIOD = 2.0
# client-go's JitterFactor: standbys retry after 2 s to 4.4 s so they do not poll in step.
JITTER_FACTOR = 1.2


class LeaderLost(Exception):
    """The Lease could not be renewed in time; work done under it must stop. The message
    says which Lease, whose, and why (taken by whom, or the last renewal's error): the
    caller logs it once, as the handover it is."""


@dataclass(frozen=True, slots=True)
class LeaderTimings:
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        # client-go's own checks: the leader must give up before a standby may take over,
        # and must get more than one renew attempt before giving up.
        if not self.lease_duration > self.renew_deadline > JITTER_FACTOR * self.retry_period > 0:
            raise ValueError(f"need lease > renew deadline > 1.2 * retry > 0, got {self}")


def default_identity() -> str:
    """Hostname plus a random suffix: two processes in one pod (or a restarted pod
    with the same name) must not mistake each other's Lease for their own."""
    return f"{socket.gethostname()}_{secrets.token_hex(4)}"


class LeaseApi(Protocol):
    """What the elector needs of runtime.transport.Transport."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        timeout: float = 30.0,  # noqa: ASYNC109 -- mirrors Transport.request
    ) -> dict[str, Any]: ...

    def stream(
        self, path: str, *, params: Mapping[str, str]
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]: ...


@dataclass(slots=True)
class Candidacy:
    """What this process knows of its own election, e.g. for /readyz; the elector writes it."""

    leading: bool = False
    # clock.monotonic() of the last round the API server answered, whoever held the Lease:
    # a standby that gets answers can take over the moment the Lease comes free.
    answered_at: float = float("-inf")


def frees_lease(event: dict[str, Any]) -> bool:
    """Whether a watch event on the Lease may have left it free: released, deleted, or an
    error (the watch expired) after which only a fresh read can tell."""
    if event.get("type") in ("DELETED", "ERROR"):
        return True
    spec = (event.get("object") or {}).get("spec") or {}
    return not spec.get("holderIdentity")


class LeaderElector:
    """Reads, decides, writes: one round per retry period. `leader_election` runs it."""

    def __init__(
        self,
        api: LeaseApi,
        *,
        namespace: str,
        name: str,
        clock: Clock,
        identity: str | None = None,
        timings: LeaderTimings = LeaderTimings(),
        candidacy: Candidacy | None = None,
    ) -> None:
        self.identity = identity or default_identity()
        self.candidacy = candidacy or Candidacy()
        self.name = name
        self._api = api
        self._clock = clock
        self._timings = timings
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._path = f"{self._collection}/{name}"
        self._namespace = namespace
        # The Lease as our last successful write left it; None unless we hold it.
        self._held: dict[str, Any] | None = None
        # Monotonic time of the renewTime our last successful write set.
        self.renewed_at = float("-inf")
        # Set when the last round saw another holder's valid Lease.
        self.observed_holder: str | None = None
        # Why the last round failed, for the message when the Lease is lost.
        self.last_error: str | None = None
        # The resourceVersion of the Lease the last round read: a standby watches for
        # changes after it (including the write that won a race against ours).
        self._observed_version: str | None = None

    async def try_acquire_or_renew(self) -> bool:
        """One round; True if we hold the Lease after it. Failures are logged, not raised."""
        try:
            held = await self._round()
        except Exception as error:
            level = logging.INFO if is_transient(error) else logging.WARNING
            log.log(level, "lease %s: round failed: %s", self.name, error)
            self.last_error = f"{type(error).__name__}: {error}"
            return False
        self.last_error = None
        return held

    async def _round(self) -> bool:
        self.observed_holder = self._observed_version = None
        request_timeout = self._timings.retry_period
        try:
            lease: dict[str, Any] | None = await self._api.request(
                "GET", self._path, timeout=request_timeout
            )
        except ApiError as error:
            if error.status != 404:
                raise
            lease = None
        decided_at = self.candidacy.answered_at = self._clock.monotonic()
        self._observed_version = lease["metadata"].get("resourceVersion") if lease else None
        action = next_action(
            lease, self.identity, self._clock.now(), lease_duration=self._timings.lease_duration
        )
        try:
            match action:
                case Wait(holder, until):
                    self.observed_holder = holder
                    self._held = None
                    log.debug("lease %s: held by %s until %s", self.name, holder, until)
                    return False
                case Create(spec):
                    body = self._new_lease(spec)
                    self._held = await self._api.request(
                        "POST", self._collection, body=body, timeout=request_timeout
                    )
                case Update(spec, acquired):
                    assert lease is not None
                    self._held = await self._api.request(
                        "PUT", self._path, body={**lease, "spec": spec}, timeout=request_timeout
                    )
                    if acquired:
                        log.info("lease %s: taken over by %s", self.name, self.identity)
        except ApiError as error:
            if error.status != 409:
                raise
            # Someone else wrote between our read and write: they won this round.
            self._held = None
            return False
        # The Lease now says renewed at (about) `decided_at`; counting from before the
        # write errs on the safe side.
        self.renewed_at = decided_at
        return True

    def _new_lease(self, spec: LeaseSpec) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self._namespace},
            "spec": spec,
        }

    async def acquire(self) -> None:
        """Return once we hold the Lease."""
        period = self._timings.retry_period
        while not await self.try_acquire_or_renew():
            await self._pause(period * (1 + random.random() * JITTER_FACTOR))
        log.info("lease %s: acquired by %s", self.name, self.identity)

    async def _pause(self, seconds: float) -> None:
        """Sleep `seconds`, or less if the Lease is seen to come free meanwhile."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._until_freed, tg.cancel_scope, seconds)
            await self._clock.sleep(seconds)
            tg.cancel_scope.cancel()

    async def _until_freed(self, wake: anyio.CancelScope, seconds: float) -> None:
        """Cancel `wake` on a watch event that may free the Lease. Best effort: on any
        error the pause simply runs its course, as a plain poll would."""
        if self._observed_version is None:
            return
        params = {
            "watch": "true",
            "fieldSelector": f"metadata.name={self.name}",
            "resourceVersion": self._observed_version,
            "timeoutSeconds": str(math.ceil(seconds) + 1),
        }
        try:
            async with self._api.stream(self._collection, params=params) as lines:
                async for line in lines:
                    if frees_lease(orjson.loads(line)):
                        wake.cancel()
                        return
        except Exception as error:
            log.debug("lease %s: watch failed, polling instead: %s", self.name, error)

    async def keep_renewing(self) -> str:
        """Renew every retry period; return, with the reason, when the Lease is lost.

        Lost means: no successful renewal within the renew deadline of the last
        one, or a round found another holder's valid Lease (ours was taken)."""
        timings = self._timings
        while True:
            await self._clock.sleep(timings.retry_period)
            remaining = self.renewed_at + timings.renew_deadline - self._clock.monotonic()
            with anyio.move_on_after(remaining):
                while not await self.try_acquire_or_renew():
                    if self.observed_holder is not None:
                        return f"taken by {self.observed_holder}"
                    await self._clock.sleep(timings.retry_period)
                continue
            why = f"not renewed within the {timings.renew_deadline:g}s renew deadline"
            return f"{why} (last attempt: {self.last_error or 'no answer in time'})"

    async def release(self) -> None:
        """Clear the holder if the Lease is still ours, so a standby need not wait it out."""
        if self._held is None:
            return
        try:
            await self._api.request(
                "PUT",
                self._path,
                body=released(self._held, self._clock.now()),
                timeout=self._timings.retry_period,
            )
            log.info("lease %s: released by %s", self.name, self.identity)
        except Exception as error:
            log.warning("lease %s: release failed (it will expire): %s", self.name, error)
        self._held = None


@dataclass(frozen=True, slots=True)
class Leadership:
    identity: str
    name: str


@asynccontextmanager
async def leader_election(
    api: LeaseApi,
    *,
    namespace: str,
    name: str,
    clock: Clock,
    identity: str | None = None,
    timings: LeaderTimings = LeaderTimings(),
    on_leading: Callable[[bool], None] | None = None,
    candidacy: Candidacy | None = None,
) -> AsyncIterator[Leadership]:
    """Enter once leader; the body is cancelled and `LeaderLost` raised if the Lease is lost;
    leaving the body releases the Lease, and so does cancelling the wait to enter it."""
    elector = LeaderElector(
        api,
        namespace=namespace,
        name=name,
        clock=clock,
        identity=identity,
        timings=timings,
        candidacy=candidacy,
    )
    try:
        await elector.acquire()
    except BaseException:
        # Cancelled (a stop) after a round may have taken the Lease: give it back.
        with anyio.CancelScope(shield=True), anyio.move_on_after(timings.retry_period * 2):
            await elector.release()
        raise
    elector.candidacy.leading = True
    if on_leading is not None:
        on_leading(True)
    lost: str | None = None  # why, once lost
    error: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:

            async def guard() -> None:
                nonlocal lost
                lost = await elector.keep_renewing()
                tg.cancel_scope.cancel()

            tg.start_soon(guard, name=f"lease {name} renewal")
            # The body's own exception is kept out of the task group, so the caller
            # sees it as raised rather than wrapped in an ExceptionGroup.
            try:
                yield Leadership(elector.identity, name)
            except Exception as exc:
                error = exc
            tg.cancel_scope.cancel()
    finally:
        elector.candidacy.leading = False
        if on_leading is not None:
            on_leading(False)
        if lost is None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(timings.retry_period * 2):
                await elector.release()
    if error is not None:
        raise error
    if lost is not None:
        raise LeaderLost(f"lease {namespace}/{name} lost by {elector.identity}: {lost}")
