"""The transports (the session's, and the runner's thin one for requests) against a small
local HTTP server standing in for the API server."""

from __future__ import annotations

import asyncio
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from controller.cli.main import main
from runtime.errors import ApiError, ConfigError
from runtime.transport import open_transport, thin
from runtime.transport.thin import open_thin_transport


class FakeServer:
    """Records what it was sent and answers from `self.routes`."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes, dict[str, str]]] = []
        self.valid_token = "one"
        self.peers: list[object] = []  # the client address of each request: its connection

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        transport = request.transport
        self.peers.append(transport.get_extra_info("peername") if transport else None)
        self.seen.append(
            (request.method, request.path, dict(request.query), body, dict(request.headers))
        )
        if request.headers.get("Authorization") != f"Bearer {self.valid_token}":
            return _status(401, "Unauthorized")
        if request.path == "/api/v1/namespaces/ns/secrets/missing":
            return _status(404, "NotFound")
        if request.path == "/busy":
            return _status(429, "TooManyRequests", headers={"Retry-After": "7"})
        if request.query.get("watch") == "true":
            return await self._watch(request)
        if request.path == "/chunked":
            return await self._chunked(request)
        if request.path == "/close":
            return web.Response(body=b'{"kind":"Closing"}', headers={"Connection": "close"})
        if request.path == "/empty":
            return web.Response(status=204)
        return web.Response(
            body=orjson.dumps({"kind": "Echo", "body": orjson.loads(body or b"null")})
        )

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        # One event split across writes, two events in one write, no trailing newline at the end.
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":')
        await response.write(b'"a"}}}\n{"type":"MODIFIED","object":{}}\n{"type":"DEL')
        await response.write(b'ETED","object":{}}')
        await response.write_eof()
        return response

    async def _chunked(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for piece in (b'{"kind":"Li', b'st","items":[', b"1,2,3", b"]}"):
            await response.write(piece)
        await response.write_eof()
        return response


def _status(code: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    status = {"kind": "Status", "code": code, "reason": reason, "message": f"m{code}"}
    return web.Response(status=code, body=orjson.dumps(status), headers=headers)


# The server must live on the test's own loop; fixtures default to the session loop.
@pytest_asyncio.fixture(loop_scope="function")
async def server() -> AsyncIterator[tuple[FakeServer, str]]:
    fake = FakeServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield fake, f"http://127.0.0.1:{port}"
    await runner.cleanup()


class Requests(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = ...,
        body: object = ...,
        content_type: str = ...,
    ) -> dict[str, Any]: ...


Opener = Callable[[str], AbstractAsyncContextManager[Requests]]
OPENERS: dict[str, Opener] = {"session": open_transport, "thin": open_thin_transport}


@pytest.fixture(params=sorted(OPENERS))
def opener(request: pytest.FixtureRequest) -> Opener:
    """Each transport that serves requests: what they answer is the same."""
    return OPENERS[request.param]


def _kubeconfig(tmp_path: Path, url: str) -> str:
    """A kubeconfig whose token comes from an exec plugin reading a file, so it can rotate."""
    token_file = tmp_path / "token"
    token_file.write_text("one")
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(
        "#!/bin/sh\n"
        'printf \'{"apiVersion":"client.authentication.k8s.io/v1beta1",'
        '"kind":"ExecCredential","status":{"token":"%s"}}\' "$(cat ' + str(token_file) + ')"\n'
    )
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": str(plugin),
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_bytes(orjson.dumps(config))
    return str(path)


async def test_request_encodes_and_decodes_json_with_auth(
    server: tuple[FakeServer, str], tmp_path: Path, opener: Opener
) -> None:
    fake, url = server
    async with opener(_kubeconfig(tmp_path, url)) as transport:
        answer = await transport.request(
            "PATCH",
            "/apis/x/v1/things/a",
            params={"fieldManager": "t"},
            body={"spec": {"n": 1}},
            content_type="application/merge-patch+json",
        )
    assert answer == {"kind": "Echo", "body": {"spec": {"n": 1}}}
    method, path, query, _, headers = fake.seen[-1]
    assert (method, path, query) == ("PATCH", "/apis/x/v1/things/a", {"fieldManager": "t"})
    assert headers["Content-Type"] == "application/merge-patch+json"


async def test_non_2xx_raises_api_error_with_status_and_retry_after(
    server: tuple[FakeServer, str], tmp_path: Path, opener: Opener
) -> None:
    _, url = server
    async with opener(_kubeconfig(tmp_path, url)) as transport:
        with pytest.raises(ApiError) as missing:
            await transport.request("GET", "/api/v1/namespaces/ns/secrets/missing")
        with pytest.raises(ApiError) as busy:
            await transport.request("GET", "/busy")
    assert (missing.value.status, missing.value.reason) == (404, "NotFound")
    assert missing.value.retry_after is None
    assert (busy.value.status, busy.value.reason, busy.value.retry_after) == (
        429,
        "TooManyRequests",
        7.0,
    )


async def test_rotated_token_is_fetched_again_after_401(
    server: tuple[FakeServer, str], tmp_path: Path, opener: Opener
) -> None:
    fake, url = server
    async with opener(_kubeconfig(tmp_path, url)) as transport:
        await transport.request("GET", "/x")
        fake.valid_token = "two"
        (tmp_path / "token").write_text("two")
        assert (await transport.request("GET", "/x"))["kind"] == "Echo"
    auth = [headers["Authorization"] for *_, headers in fake.seen]
    assert auth == ["Bearer one", "Bearer one", "Bearer two"]


async def test_stream_yields_whole_lines_however_the_body_is_chunked(
    server: tuple[FakeServer, str], tmp_path: Path
) -> None:
    _, url = server
    async with (
        open_transport(_kubeconfig(tmp_path, url)) as transport,
        transport.stream("/api/v1/pods", params={"watch": "true"}) as lines,
    ):
        events = [orjson.loads(line)["type"] async for line in lines]
    assert events == ["ADDED", "MODIFIED", "DELETED"]


async def test_stream_raises_on_entry_for_non_2xx(
    server: tuple[FakeServer, str], tmp_path: Path
) -> None:
    _, url = server
    async with open_transport(_kubeconfig(tmp_path, url)) as transport:
        with pytest.raises(ApiError) as gone:
            async with transport.stream("/busy", params={"watch": "true"}):
                pytest.fail("entered a stream that answered 429")
    assert gone.value.status == 429


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "is not a readable file"),
        ("apiVersion: v1\nkind: Config\nclusters: []\n", "current-context"),
    ],
    ids=["missing", "no-current-context"],
)
async def test_no_usable_kubeconfig_is_a_config_error(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=says):
        async with open_transport(str(path)):
            pass


def test_captf_run_without_a_cluster_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["run", "--kubeconfig", str(tmp_path / "nope")])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert (
        err
        == f"captf: no cluster to talk to: kubeconfig {tmp_path / 'nope'} is not a readable file\n"
    )


async def test_thin_reads_chunked_and_empty_answers(
    server: tuple[FakeServer, str], tmp_path: Path
) -> None:
    _, url = server
    async with open_thin_transport(_kubeconfig(tmp_path, url)) as transport:
        assert await transport.request("GET", "/chunked") == {"kind": "List", "items": [1, 2, 3]}
        assert await transport.request("DELETE", "/empty") == {}
        assert (await transport.request("GET", "/x"))["kind"] == "Echo"


async def test_thin_keeps_one_connection_until_the_server_closes_it(
    server: tuple[FakeServer, str], tmp_path: Path
) -> None:
    fake, url = server
    async with open_thin_transport(_kubeconfig(tmp_path, url)) as transport:
        for path in ("/a", "/b", "/close", "/c", "/d"):
            await transport.request("GET", path)
    first, second = fake.peers[:3], fake.peers[3:]
    assert len(set(first)) == 1, "one connection until the answer that closes it"
    assert len(set(second)) == 1, "then a fresh one, kept"
    assert set(first).isdisjoint(second)


async def test_thin_does_not_reuse_a_connection_idle_too_long(
    server: tuple[FakeServer, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = server
    monkeypatch.setattr(thin, "KEEPALIVE_S", 0.0)  # every connection is idle too long at once
    async with open_thin_transport(_kubeconfig(tmp_path, url)) as transport:
        for path in ("/a", "/b", "/c"):
            await transport.request("GET", path)
    assert len(set(fake.peers)) == 3


async def test_the_runner_entry_loads_neither_aiohttp_nor_the_planner() -> None:
    """A runner pod's start-up (about 0.1 s of CPU each for aiohttp and the core's planner
    rooms, once per Job): its entrypoint, imported in a fresh interpreter, loads neither,
    nor the full command line or a YAML parser."""
    heavy = ("aiohttp", "yaml", "controller.core.plan", "controller.cli.main")
    code = (
        "import sys, controller.cli.entry, controller.runner.main;"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert (proc.returncode, out.decode().strip()) == (0, "[]")
