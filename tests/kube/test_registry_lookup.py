"""The controller's module image lookups (controller/io/registry.py) against the real
registries: the digest, the layers' size and the role label; a missing image, a registry
wanting credentials (given through the runner ServiceAccount's imagePullSecrets, or not),
a registry answering 500; and the short cache."""

from __future__ import annotations

import asyncio
import http.server
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.core import ImageLookup, Resolved, Unresolved
from controller.io.registry import FAILURE_TTL, ImageRegistry
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry
from runtime.transport import open_transport
from tests.kube.harness import Kube
from tests.registry_support import (
    REGISTRY_USER,
    crane,
    dockerconfigjson,
    layer,
    push,
    requests,
)

pytestmark = pytest.mark.kube
ACCOUNT = "captf-runner"


@pytest.fixture
def repo() -> str:
    return f"lookup/{uuid.uuid4().hex[:10]}"


def labelled(registry: Registry, tmp_path: Path, reference: str, role: str) -> str:
    """Push a one-layer image with the role label; its digest."""
    push(registry, reference, [layer(tmp_path / "l.tar.gz", {"captf/module/main.tf": b"#\n"})])
    target = f"{registry.host}/{reference}"
    crane(registry, "mutate", target, "-l", f"io.captf.role={role}", "-t", target)
    return crane(registry, "digest", target)


async def resolve(
    server: ApiServer, lookups: ImageRegistry, reference: str, namespace: str
) -> Resolved | Unresolved:
    async with open_transport(str(server.kubeconfig)) as client:
        return await lookups.resolve(client, ImageLookup(reference, namespace, ACCOUNT))


async def test_a_tag_resolves_to_its_digest_size_and_role_and_is_cached(
    apiserver: ApiServer, namespace: str, registry: Registry, repo: str, tmp_path: Path
) -> None:
    digest = labelled(registry, tmp_path, f"{repo}:1", "machine")
    reference = f"{registry.host}/{repo}:1"
    lookups = ImageRegistry(SteppedClock())
    found = await resolve(apiserver, lookups, reference, namespace)
    assert isinstance(found, Resolved)
    assert (found.digest, found.role) == (digest, "machine")
    assert found.size == (tmp_path / "l.tar.gz").stat().st_size
    asked = requests(registry, f"/v2/{repo}/manifests/")
    assert await resolve(apiserver, lookups, reference, namespace) == found
    assert requests(registry, f"/v2/{repo}/manifests/") == asked  # the cache answered
    peeked = lookups.peek(reference, namespace)
    assert isinstance(peeked, Resolved)
    assert not peeked.asked


async def test_objects_asking_together_share_one_lookup(
    apiserver: ApiServer, namespace: str, registry: Registry, repo: str, tmp_path: Path
) -> None:
    """A MachineDeployment's Machines ask at once: one manifest and one config read."""
    digest = labelled(registry, tmp_path, f"{repo}:1", "machine")
    reference = f"{registry.host}/{repo}:1"
    lookups = ImageRegistry(SteppedClock())
    # Access-log lines of GETs (the push before read the repository too).
    manifests, blobs = f'"GET /v2/{repo}/manifests/', f'"GET /v2/{repo}/blobs/'
    before = requests(registry, manifests), requests(registry, blobs)
    async with open_transport(str(apiserver.kubeconfig)) as client:
        lookup = ImageLookup(reference, namespace, ACCOUNT)
        found = await asyncio.gather(*(lookups.resolve(client, lookup) for _ in range(20)))
    assert {f.digest for f in found if isinstance(f, Resolved)} == {digest}
    assert len(found) == 20
    assert (requests(registry, manifests), requests(registry, blobs)) == (
        before[0] + 1,
        before[1] + 1,
    )


async def test_a_missing_image_is_not_found_and_asked_again_after_the_failure_ttl(
    apiserver: ApiServer, namespace: str, registry: Registry, repo: str
) -> None:
    clock = SteppedClock()
    lookups = ImageRegistry(clock)
    reference = f"{registry.host}/{repo}:nope"
    found = await resolve(apiserver, lookups, reference, namespace)
    assert isinstance(found, Unresolved)
    assert found.kind == "ImageNotFound"
    assert reference in found.message
    asked = requests(registry, f"/v2/{repo}/manifests/")
    await resolve(apiserver, lookups, reference, namespace)
    assert requests(registry, f"/v2/{repo}/manifests/") == asked
    await clock.advance(FAILURE_TTL + 1)
    await resolve(apiserver, lookups, reference, namespace)
    assert requests(registry, f"/v2/{repo}/manifests/") > asked


async def test_a_registry_wanting_credentials_is_unauthorized_without_the_pull_secret(
    apiserver: ApiServer,
    namespace: str,
    auth_registry: Registry,
    repo: str,
    tmp_path: Path,
) -> None:
    kube = Kube(apiserver, namespace)
    user, password = REGISTRY_USER
    config = tmp_path / "docker"
    config.mkdir()
    (config / "config.json").write_text(dockerconfigjson(auth_registry.host, user, password))
    digest = push(
        auth_registry,
        f"{repo}:1",
        [layer(tmp_path / "l.tar.gz", {"a": b"a"})],
        docker_config=config,
    )
    reference = f"{auth_registry.host}/{repo}:1"
    base = f"/api/v1/namespaces/{namespace}"
    await kube.call("POST", f"{base}/serviceaccounts", {"metadata": {"name": ACCOUNT}})

    refused = await resolve(apiserver, ImageRegistry(SteppedClock()), reference, namespace)
    assert isinstance(refused, Unresolved)
    assert refused.kind == "RegistryUnauthorized"
    assert password not in refused.message

    secret = {
        "metadata": {"name": "regcred"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": dockerconfigjson(auth_registry.host, user, password)},
    }
    await kube.call("POST", f"{base}/secrets", secret)
    patch = {"imagePullSecrets": [{"name": "regcred"}]}
    await kube.call(
        "PATCH", f"{base}/serviceaccounts/{ACCOUNT}", patch, "application/merge-patch+json"
    )
    # New credentials are another cache key: the 401 cached a moment ago is not served.
    lookups = ImageRegistry(SteppedClock())
    found = await resolve(apiserver, lookups, reference, namespace)
    assert isinstance(found, Resolved)
    assert found.digest == digest


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(500)
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_registry() -> Iterator[str]:
    """An HTTP server on loopback that answers every request with 500."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_registry_answering_500_is_unavailable(
    apiserver: ApiServer, namespace: str, failing_registry: str
) -> None:
    lookups = ImageRegistry(SteppedClock())
    reference = f"{failing_registry}/team/mod:1"
    found = await resolve(apiserver, lookups, reference, namespace)
    assert isinstance(found, Unresolved)
    assert found.kind == "RegistryUnavailable"
    assert "500" in found.message
