"""The controller's two Secret caches against the real API server: the Secrets CAPTF
wrote (labelled) are held with their data and read without a request; the user's, and
the ones written before the label, are held as metadata and their data fetched."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from controller.core.basics.names import LABEL_NAME, LABEL_PLAN_OF, MANAGED_BY
from controller.io.caches import Caches
from controller.io.contents import Wanted
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.transport import Transport, open_transport
from tests.kube.harness import eventually

pytestmark = pytest.mark.kube
MERGE = "application/merge-patch+json"
NEW = "c-inputs-1111bbbb"
OLD = "c-inputs-0000aaaa"


@pytest_asyncio.fixture(loop_scope="function")
async def transport(apiserver: ApiServer) -> AsyncIterator[Transport]:
    async with open_transport(str(apiserver.kubeconfig)) as opened:
        yield opened


def _secret(name: str, labels: dict[str, str], value: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels}, "stringData": {"k": value}}


async def test_secrets_captf_wrote_are_read_without_a_request(
    apiserver: ApiServer, namespace: str, transport: Transport
) -> None:
    path = f"/api/v1/namespaces/{namespace}/secrets"
    apiserver.request("POST", path, _secret("creds", {}, "user"))
    apiserver.request("POST", path, _secret(OLD, {LABEL_NAME: "c"}, "older"))
    apiserver.request("POST", path, _secret(NEW, {LABEL_NAME: "c"} | MANAGED_BY, "newer"))
    apiserver.request("POST", path, _secret("p1", {LABEL_PLAN_OF: "c"} | MANAGED_BY, "plan"))
    caches = Caches(transport, clock=LoopClock(), namespace=namespace)
    contents = caches.secret_data
    wanted = [Wanted("creds"), Wanted(OLD), Wanted(NEW), Wanted("p1", keys_only=True)]

    def names(store_of: str) -> list[str]:
        informer = caches.own_secrets if store_of == "own" else caches.secrets
        return sorted(s["metadata"]["name"] for s in informer.store)

    async with contextlib.AsyncExitStack() as stack:
        for informer in (caches.secrets, caches.own_secrets):
            await stack.enter_async_context(informer)
            await informer.wait_synced()
        assert names("own") == sorted([NEW, "p1"])
        assert OLD in names("metadata")
        assert "creds" in names("metadata")
        await contents.load(namespace, wanted)
        assert contents.fetches == 2  # creds and the older inputs Secret
        assert contents.data(namespace, NEW) == {"k": "bmV3ZXI="}
        assert contents.data(namespace, OLD) == {"k": "b2xkZXI="}
        assert contents.data(namespace, "p1") == {"k": ""}
        # Labelled later (a runner of this version rewriting an older state), a Secret
        # moves from one cache to the other and is no longer fetched.
        apiserver.request(
            "PATCH", f"{path}/{OLD}", {"metadata": {"labels": MANAGED_BY}}, content_type=MERGE
        )

        async def moved() -> bool:
            return OLD in names("own") and OLD not in names("metadata")

        await eventually(moved, what="the relabelled Secret in the labelled cache")
        await contents.load(namespace, wanted)
        assert contents.fetches == 2
        assert contents.data(namespace, OLD) == {"k": "b2xkZXI="}
