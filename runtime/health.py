"""The health and metrics endpoints: /healthz, /readyz, /metrics.

/healthz is liveness: it answers ok whenever it is asked, because the question it
really answers is whether the event loop turns. It is served from the same loop
that runs the reconciles and renews the leader Lease, so a loop that is wedged (a
blocking call, a busy loop, a deadlock in native code) leaves the probe unanswered
and the kubelet restarts the process after its failure threshold. It depends on
nothing outside the process: a restart cures no API-server outage, and would turn
one into every replica restarting at once.

/readyz answers ok once every registered readiness check passes (e.g. "this
process can serve its role") and lists the failing ones otherwise. /metrics exposes
the given registry."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Self

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from runtime.lifecycle import RunsInContext

ReadinessCheck = Callable[[], bool]

# Loopback by default: the endpoints carry no authentication.
DEFAULT_ADDRESS = "127.0.0.1:8080"


class CannotListen(Exception):
    """The address cannot be served (in use, not local, not permitted); says which and why."""


async def serve(
    app: web.Application,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    reuse_port: bool = False,
) -> tuple[web.AppRunner, int]:
    """Starts serving `app` on host:port; returns the runner (the caller cleans it up) and
    the bound port (the one picked when `port` is 0). An address that cannot be served
    raises CannotListen, with nothing left running."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, reuse_port=reuse_port or None)
    try:
        await site.start()
    except OSError as error:
        await runner.cleanup()
        why = (error.strerror or str(error)).lower()
        raise CannotListen(f"cannot listen on {host}:{port}: {why}") from error
    return runner, port or int(runner.addresses[0][1])


def parse_address(address: str) -> tuple[str, int]:
    """ "host:port" (an IPv6 host in brackets) -> (host, port); port 0 picks a free one."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected host:port, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class HealthServer(RunsInContext):
    """`async with HealthServer(registry, address=...) as server:` serves until the block ends."""

    def __init__(
        self, registry: CollectorRegistry, *, address: str = DEFAULT_ADDRESS, metrics: bool = True
    ) -> None:
        """Without `metrics`, /metrics is not served here (runtime.metrics_auth serves it)."""
        self._registry = registry
        self._serve_metrics = metrics
        self._host, self._port = parse_address(address)
        self._checks: dict[str, ReadinessCheck] = {}
        self._runner: web.AppRunner | None = None

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        """/readyz fails while `check()` is false; checks must be cheap and not block."""
        self._checks[name] = check

    @property
    def port(self) -> int:
        """The bound port (useful with port 0); valid inside the `async with` block."""
        return self._port

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Self]:
        """Serves while the block runs."""
        await self._start()
        try:
            yield self
        finally:
            if self._runner is not None:
                await self._runner.cleanup()
                self._runner = None

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        if self._serve_metrics:
            app.router.add_get("/metrics", self._metrics)
        self._runner, self._port = await serve(app, self._host, self._port)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        failing = sorted(name for name, check in self._checks.items() if not check())
        if failing:
            text = "".join(f"[-] {name} failed\n" for name in failing)
            return web.Response(status=503, text=text + "not ready\n")
        text = "".join(f"[+] {name} ok\n" for name in sorted(self._checks))
        return web.Response(text=text + "ok\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
