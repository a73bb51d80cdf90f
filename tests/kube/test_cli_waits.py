"""The live commands wait out an API server's `429 TooManyRequests: storage is
(re)initializing`, as kubectl does: through a loopback proxy (plain HTTP, as `kubectl
proxy` serves) that answers so before it passes requests on to the real API server."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import yaml
from aiohttp import ClientSession, TCPConnector, web

from controller.cli.main import main
from runtime.envtest import ApiServer
from runtime.envtest.client import admin_ssl_context
from tests.kube.harness import Kube
from tests.kube.test_state_cli import _write, tfstate

pytestmark = pytest.mark.kube
INITIALIZING = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "storage is (re)initializing",
    "reason": "TooManyRequests",
    "code": 429,
}


class Fresh:
    """What a freshly started API server answers its first `refusals` requests."""

    def __init__(self, server: ApiServer, refusals: int) -> None:
        self.server = server
        self.refusals = refusals
        self.answered: list[int] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.refusals > 0:
            self.refusals -= 1
            self.answered.append(429)
            return web.json_response(INITIALIZING, status=429, headers={"Retry-After": "1"})
        connector = TCPConnector(ssl=admin_ssl_context(self.server.pki))
        async with (
            ClientSession(connector=connector) as session,
            session.request(
                request.method,
                self.server.url + request.path_qs,
                data=await request.read(),
                headers={"Content-Type": request.headers.get("Content-Type", "")},
            ) as answer,
        ):
            self.answered.append(answer.status)
            body = await answer.read()
            kind = answer.headers.get("Content-Type", "application/json")
            return web.Response(status=answer.status, body=body, headers={"Content-Type": kind})


@asynccontextmanager
async def fresh_proxy(server: ApiServer, refusals: int, kubeconfig: Path) -> AsyncIterator[Fresh]:
    """The proxy on a free loopback port until the block ends, and a kubeconfig to it."""
    fresh = Fresh(server, refusals)
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", fresh.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "p", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "p", "context": {"cluster": "p", "user": "u"}}],
        "current-context": "p",
    }
    await asyncio.to_thread(kubeconfig.write_text, yaml.safe_dump(config))
    try:
        yield fresh
    finally:
        await runner.cleanup()


async def captf(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path, ns: str, *argv: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    status = await asyncio.to_thread(main, [*argv, "-n", ns, "--kubeconfig", str(kubeconfig)])
    out, err = capsys.readouterr()
    return status, out, err


async def test_state_pull_waits_out_a_fresh_api_server(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    await Kube(apiserver, namespace).setup_cluster()
    state = tfstate(3, ["a", "b"])
    await _write(apiserver, namespace, state)
    pulled = tmp_path / "state.json"
    kubeconfig = tmp_path / "proxy.kubeconfig"
    async with fresh_proxy(apiserver, 2, kubeconfig) as fresh:
        status, out, err = await captf(
            capsys, kubeconfig, namespace, "state", "pull", "tfc/c1", str(pulled)
        )
    assert status == 0, err
    assert pulled.read_bytes() == state
    assert fresh.answered[:3] == [429, 429, 200]
    waits = [line for line in err.splitlines() if "waiting" in line]
    first = f"captf: GET /apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}"
    first += "/terraformclusters/c1: 429 TooManyRequests: storage is (re)initializing; waiting 1s"
    assert [line.startswith(first) for line in waits[:2]] == [True, True]
    # The session's API server answers so too, for a resource whose watch cache is still
    # initializing (its lists of CRDs installed moments ago): the case of a fresh server.
    assert all("429 TooManyRequests: storage is (re)initializing" in line for line in waits)
    assert len(waits) == fresh.answered.count(429)
    assert out == ""


async def test_a_server_that_stays_down_is_given_up_on_at_the_request_timeout(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "proxy.kubeconfig"
    async with fresh_proxy(apiserver, 1000, kubeconfig) as fresh:
        status, _, err = await captf(
            capsys, kubeconfig, namespace, "get", "--request-timeout", "3s"
        )
    assert status == 1
    # Retry-After 1 s: two waits fit in 3 s (three on a machine that answers at once),
    # the last attempt says it gives up, and the command fails on the answer.
    assert 2 <= len(fresh.answered) <= 3
    assert set(fresh.answered) == {429}
    *waits, gave_up, failed = err.splitlines()
    assert len(waits) == len(fresh.answered) - 1
    assert re.search(r"giving up after [23]s \(--request-timeout=3s\)$", gave_up)
    assert "429 TooManyRequests: storage is (re)initializing" in failed
