"""What a lookup makes of a registry's answers (controller/io/oci.py, registry.py): one
of three kinds, with a message of the controller's own that never repeats what the
registry said; the bearer token flow; credentials never following a redirect; and one
lookup shared by concurrent askers. The registry is a small aiohttp server on loopback
answering as each case says (the real registry, plain and with htpasswd, is
tests/kube/test_registry_lookup.py's)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from aiohttp import web

from controller.core import ImageLookup, Resolved, Unresolved
from controller.io.oci import Name, parse
from controller.io.registry import ImageRegistry
from runtime.clock import SteppedClock
from tests.fakeapi import FakeApi

SECRET = "hunter2-token"
CONFIG = json.dumps({"config": {"Labels": {"io.captf.role": "machine"}}}).encode()
CONFIG_DIGEST = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"digest": CONFIG_DIGEST, "size": len(CONFIG)},
        "layers": [{"digest": "sha256:" + "a" * 64, "size": 1234}],
    }
).encode()
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Server:
    """A registry whose answer to each path is `routes`' handler, else the image."""

    host: str = ""
    seen: list[web.Request] = field(default_factory=list)
    routes: dict[str, Handler] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(request)
        for prefix, handler in self.routes.items():
            if request.path.startswith(prefix):
                return await handler(request)
        return await image(request)

    def asked(self, part: str) -> int:
        return sum(1 for r in self.seen if part in r.path)


async def image(request: web.Request) -> web.StreamResponse:
    if "/manifests/" in request.path:
        return web.Response(body=MANIFEST, headers={"Docker-Content-Digest": DIGEST})
    if request.path.endswith(CONFIG_DIGEST):
        return web.Response(body=CONFIG)
    return web.Response(status=404)


async def serve(server: Server) -> AsyncIterator[Server]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.host = f"127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="function")
async def registry() -> AsyncIterator[Server]:
    async for server in serve(Server()):
        yield server


async def resolve(
    host: str, ref: str = "team/mod:1", lookups: ImageRegistry | None = None
) -> Resolved | Unresolved:
    lookups = lookups or ImageRegistry(SteppedClock())
    return await lookups.resolve(FakeApi(), ImageLookup(f"{host}/{ref}", "ns", None))


def status(code: int, headers: dict[str, str] | None = None) -> Handler:
    async def answer(request: web.Request) -> web.StreamResponse:
        body = f"error: {SECRET} for {request.path_qs}"
        return web.Response(status=code, text=body, headers=headers or {})

    return answer


CASES = [
    (404, {}, "ImageNotFound", "has no image"),
    (400, {}, "ImageNotFound", "has no image"),
    (401, {"WWW-Authenticate": 'Basic realm="r"'}, "RegistryUnauthorized", "without valid"),
    (403, {}, "RegistryUnauthorized", "without valid"),
    (500, {}, "RegistryUnavailable", "answered HTTP 500"),
    (503, {}, "RegistryUnavailable", "answered HTTP 503"),
    (429, {}, "RegistryUnavailable", "answered HTTP 429"),
]


@pytest.mark.parametrize(("code", "headers", "kind", "says"), CASES)
async def test_an_answer_is_one_of_three_kinds_in_our_own_words(
    registry: Server, code: int, headers: dict[str, str], kind: str, says: str
) -> None:
    registry.routes["/v2/"] = status(code, headers)
    found = await resolve(registry.host)
    assert isinstance(found, Unresolved)
    assert (found.kind, says in found.message) == (kind, True)
    assert f"{registry.host}/team/mod:1" in found.message
    assert SECRET not in found.message


async def test_a_registry_not_listening_could_not_be_reached(registry: Server) -> None:
    found = await resolve("127.0.0.1:1")
    assert isinstance(found, Unresolved)
    assert (found.kind, "could not be reached" in found.message) == ("RegistryUnavailable", True)


@pytest.mark.parametrize(
    "tamper",
    ["manifest digest header", "manifest by digest", "config bytes", "config size"],
)
async def test_content_that_does_not_match_its_digest_is_refused(
    registry: Server, tamper: str
) -> None:
    other = MANIFEST + b" "

    async def manifest(request: web.Request) -> web.StreamResponse:
        if tamper == "manifest digest header":
            wrong = {"Docker-Content-Digest": "sha256:" + "0" * 64}
            return web.Response(body=MANIFEST, headers=wrong)
        return web.Response(body=other)

    async def config(request: web.Request) -> web.StreamResponse:
        return web.Response(body=CONFIG[:-1] + b"]" if tamper == "config bytes" else CONFIG + b" ")

    if tamper.startswith("manifest"):
        registry.routes["/v2/team/mod/manifests/"] = manifest
    else:
        registry.routes["/v2/team/mod/blobs/"] = config
    ref = f"team/mod@{DIGEST}" if tamper == "manifest by digest" else "team/mod:1"
    found = await resolve(registry.host, ref)
    assert isinstance(found, Unresolved)
    assert found.kind == "RegistryUnavailable"


async def test_a_tag_resolves_to_the_hash_of_its_manifest(registry: Server) -> None:
    found = await resolve(registry.host)
    assert found == Resolved(f"{registry.host}/team/mod:1", DIGEST, 1234, "machine")
    assert registry.seen[-1].headers.get("Authorization") is None


async def test_a_bearer_challenge_gets_a_token_with_the_pull_secret(registry: Server) -> None:
    """The token service gets the user's password for the repository's pull scope; the
    registry gets only the token, and a blob redirected elsewhere gets neither."""
    basic = base64.b64encode(b"puller:" + SECRET.encode()).decode()
    tokens: list[web.Request] = []

    async def guarded(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer tok-1":
            realm = f"http://{registry.host}/token"
            challenge = f'Bearer realm="{realm}",service="reg",scope="x"'
            return web.Response(status=401, headers={"WWW-Authenticate": challenge})
        if "/blobs/" in request.path:
            raise web.HTTPTemporaryRedirect(f"http://localhost:{registry.host.split(':')[1]}/b")
        return await image(request)

    async def token(request: web.Request) -> web.StreamResponse:
        tokens.append(request)
        ok = request.headers.get("Authorization") == f"Basic {basic}"
        return web.json_response({"token": "tok-1"}) if ok else web.Response(status=401)

    async def blob(request: web.Request) -> web.StreamResponse:
        assert request.headers.get("Authorization") is None
        return web.Response(body=CONFIG)

    registry.routes = {"/token": token, "/b": blob, "/v2/": guarded}
    lookups = ImageRegistry(SteppedClock())
    anonymous = await resolve(registry.host, lookups=lookups)
    assert isinstance(anonymous, Unresolved)
    assert anonymous.kind == "RegistryUnauthorized"

    auths = {registry.host: {"auth": basic}}
    found = await lookups._lookup(f"{registry.host}/team/mod:1", auths)
    assert (found.digest, found.role) == (DIGEST, "machine")
    assert tokens[-1].query == {"scope": "repository:team/mod:pull", "service": "reg"}
    assert [r.path for r in registry.seen].count("/b") == 1


async def test_concurrent_askers_share_one_lookup_and_its_answer_is_cached(
    registry: Server,
) -> None:
    gate, arrived = asyncio.Event(), asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        arrived.set()
        await gate.wait()
        return await image(request)

    registry.routes["/v2/team/mod/manifests/"] = slow
    lookups = ImageRegistry(SteppedClock())
    asking = [asyncio.ensure_future(resolve(registry.host, lookups=lookups)) for _ in range(30)]
    await arrived.wait()
    await asyncio.sleep(0.1)  # the other askers reach the lookup in flight
    gate.set()
    found = await asyncio.gather(*asking)
    assert {f.digest for f in found if isinstance(f, Resolved)} == {DIGEST}
    assert len(found) == 30
    assert await resolve(registry.host, lookups=lookups) == found[0]
    assert (registry.asked("/manifests/"), registry.asked("/blobs/")) == (1, 1)


@pytest.mark.parametrize(
    ("reference", "name"),
    [
        ("127.0.0.1:5000/team/mod:1", Name("127.0.0.1:5000", "team/mod", "1", "")),
        ("reg.example/a/b/c", Name("reg.example", "a/b/c", "latest", "")),
        (f"localhost/m@{DIGEST}", Name("localhost", "m", "", DIGEST)),
        ("team/mod:v2", Name("index.docker.io", "team/mod", "v2", "")),
        ("ubuntu", Name("index.docker.io", "library/ubuntu", "latest", "")),
    ],
)
def test_references_parse_as_go_containerregistry_reads_them(reference: str, name: Name) -> None:
    assert parse(reference) == name


@pytest.mark.parametrize("reference", ["reg.example//x", "reg.example/UP/x", "r.example/x@sha1:a"])
async def test_a_reference_that_is_none_is_not_found(reference: str) -> None:
    found = await ImageRegistry(SteppedClock())._ask(reference, {})
    assert isinstance(found, Unresolved)
    assert found.kind == "ImageNotFound"
