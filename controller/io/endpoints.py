"""The process's HTTP(S) endpoints besides the controller's own work: where /healthz and
/readyz are served (with /metrics, or on a port of their own under --metrics-secure),
/metrics over HTTPS for tokens the API server allows, and the admission webhooks.
`captf run` (main.py) opens them before it campaigns, on every replica."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from prometheus_client import CollectorRegistry

from controller.io.admission import Webhooks
from controller.io.config import ControllerConfig
from runtime.admission import AdmissionServer
from runtime.clock import LoopClock
from runtime.health import CannotListen, parse_address
from runtime.metrics_auth import KubeReviewer, SecureMetricsServer
from runtime.transport import Transport


def health_addr(args: ControllerConfig) -> str:
    """With --metrics-secure, the probes have a plain HTTP port of their own."""
    return args.health_probe_addr if args.metrics_secure else args.metrics_addr


def secure_metrics(
    args: ControllerConfig, registry: CollectorRegistry, transport: Transport
) -> contextlib.AbstractAsyncContextManager[object]:
    """HTTPS /metrics for tokens the API server allows (runtime.metrics_auth)."""
    if not args.metrics_secure:
        return contextlib.nullcontext()
    cert_dir = Path(args.metrics_cert_dir) if args.metrics_cert_dir else None
    reviewer = KubeReviewer(transport, LoopClock())
    return SecureMetricsServer(registry, reviewer, address=args.metrics_addr, cert_dir=cert_dir)


class WebhookCannotListen(CannotListen):
    """--webhook-addr cannot be served."""


@contextlib.asynccontextmanager
async def webhooks(args: ControllerConfig, transport: Transport) -> AsyncIterator[None]:
    """The admission and conversion webhooks, on every replica (controller/io/admission.py)."""
    if not args.webhook_addr:
        yield
        return
    cert_dir = Path(args.webhook_cert_dir) if args.webhook_cert_dir else None
    hooks = Webhooks(transport)
    server = AdmissionServer(
        hooks.reviews(),
        address=args.webhook_addr,
        cert_dir=cert_dir,
        conversions=hooks.conversions(),
    )
    try:
        await server.__aenter__()
    except CannotListen as err:
        raise WebhookCannotListen(str(err)) from err
    try:
        yield
    finally:
        await server.__aexit__(None, None, None)


def url_host(args: ControllerConfig, port: int) -> str:
    host, _ = parse_address(health_addr(args))
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
