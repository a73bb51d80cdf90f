"""Readiness and liveness probes against a local process, with the kubelet's counting.

`httpGet` (any status from 200 to 399 succeeds) and `tcpSocket` are supported;
the host is the pod's IP unless the probe names one, a named port is looked up
in the container's ports. An `exec` probe is not: it always fails, and says so
in the node's log once."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import anyio

from runtime.clock import Clock
from runtime.jsonobj import Json

logger = logging.getLogger("controller.dev.node")


@dataclass(frozen=True)
class ProbeSpec:
    """A probe's timing with the API's defaults."""

    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int

    @classmethod
    def of(cls, probe: Json) -> ProbeSpec:
        return cls(
            initial_delay=float(probe.get("initialDelaySeconds", 0)),
            period=float(probe.get("periodSeconds", 10)),
            timeout=float(probe.get("timeoutSeconds", 1)),
            success_threshold=int(probe.get("successThreshold", 1)),
            failure_threshold=int(probe.get("failureThreshold", 3)),
        )


def check_of(probe: Json, container: Json, pod_ip: str) -> Callable[[float], Awaitable[bool]]:
    """One attempt of `probe`: True when it succeeds within `timeout` seconds."""
    if "httpGet" in probe:
        get = probe["httpGet"]
        host = get.get("host") or pod_ip
        port = port_number(get["port"], container)
        scheme = str(get.get("scheme", "HTTP")).lower()
        url = f"{scheme}://{host}:{port}{get.get('path', '/')}"
        headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
        return lambda timeout: _http(url, headers, timeout)
    if "tcpSocket" in probe:
        sock = probe["tcpSocket"]
        host = sock.get("host") or pod_ip
        port = port_number(sock["port"], container)
        return lambda timeout: _tcp(host, port, timeout)
    logger.warning("probe %s is not supported by the process node; it fails", sorted(probe))
    return _never


def port_number(port: int | str, container: Json) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise ValueError(f"no container port named {port!r}")


async def _http(url: str, headers: dict[str, str], timeout: float) -> bool:  # noqa: ASYNC109
    try:
        client_timeout = aiohttp.ClientTimeout(total=timeout)
        async with (
            aiohttp.ClientSession(timeout=client_timeout) as session,
            session.get(url, headers=headers, ssl=False, allow_redirects=False) as response,
        ):
            return 200 <= response.status < 400
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False


async def _tcp(host: str, port: int, timeout: float) -> bool:  # noqa: ASYNC109
    try:
        with anyio.fail_after(timeout):
            stream = await anyio.connect_tcp(host, port)
        await stream.aclose()
        return True
    except (OSError, TimeoutError):
        return False


async def _never(timeout: float) -> bool:  # noqa: ASYNC109
    return False


async def run_probe(
    spec: ProbeSpec,
    check: Callable[[float], Awaitable[bool]],
    clock: Clock,
    on_result: Callable[[bool], None],
) -> None:
    """Probe every period forever; `on_result(True)` after `success_threshold` successes
    in a row, `on_result(False)` after `failure_threshold` failures in a row."""
    await clock.sleep(spec.initial_delay)
    successes = failures = 0
    while True:
        if await check(spec.timeout):
            successes, failures = successes + 1, 0
            if successes >= spec.success_threshold:
                on_result(True)
        else:
            successes, failures = 0, failures + 1
            if failures >= spec.failure_threshold:
                on_result(False)
        await clock.sleep(spec.period)
