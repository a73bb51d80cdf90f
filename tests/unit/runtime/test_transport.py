"""The transport against a small local HTTP server standing in for the API server."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from controller.cli.main import main
from runtime.errors import ApiError, ConfigError
from runtime.transport import open_transport


class FakeServer:
    """Records what it was sent and answers from `self.routes`."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes, dict[str, str]]] = []
        self.valid_token = "one"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
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
    server: tuple[FakeServer, str], tmp_path: Path
) -> None:
    fake, url = server
    async with open_transport(_kubeconfig(tmp_path, url)) as transport:
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
    server: tuple[FakeServer, str], tmp_path: Path
) -> None:
    _, url = server
    async with open_transport(_kubeconfig(tmp_path, url)) as transport:
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
    server: tuple[FakeServer, str], tmp_path: Path
) -> None:
    fake, url = server
    async with open_transport(_kubeconfig(tmp_path, url)) as transport:
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
