"""Reflector and informer against the real API server: list, watch, 410, bookmarks, restarts."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio

from runtime.cache import Bookmark, Informer, Listed, Resource, Selection, label_index, reflect
from runtime.cache import reflector as reflector_module
from runtime.cache.reflector import ListWatchTransport
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.transport import Transport, open_transport

pytestmark = pytest.mark.kube

CONFIGMAPS = Resource("", "v1", "configmaps")
# The launcher turns the watch cache off for podtemplates, so etcd's compaction shows through.
PODTEMPLATES = Resource("", "v1", "podtemplates")
SECRETS = Resource("", "v1", "secrets")
MERGE = "application/merge-patch+json"


@pytest_asyncio.fixture(loop_scope="function")
async def transport(apiserver: ApiServer) -> AsyncIterator[Transport]:
    async with open_transport(str(apiserver.kubeconfig)) as opened:
        yield opened


class Severable:
    """The real transport, plus a switch that cuts every open watch and holds new ones."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.open = asyncio.Event()
        self.open.set()
        self.watch_versions: list[str] = []
        self._cut = asyncio.Event()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        await self.open.wait()
        return await self.inner.request(method, path, params=params, accept=accept)

    def stream(
        self, path: str, *, params: Mapping[str, str], accept: str = "application/json"
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        return self._stream(path, params, accept)

    @asynccontextmanager
    async def _stream(
        self, path: str, params: Mapping[str, str], accept: str
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        await self.open.wait()
        # A streaming list starts from no version: recorded as "list".
        self.watch_versions.append(params.get("resourceVersion") or "list")
        async with self.inner.stream(path, params=params, accept=accept) as lines:
            yield self._until_cut(lines)

    async def _until_cut(self, lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        iterator = aiter(lines)
        while True:
            next_line = asyncio.ensure_future(anext(iterator))
            cut = asyncio.ensure_future(self._cut.wait())
            try:
                await asyncio.wait({next_line, cut}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in (next_line, cut):
                    if not waiting.done():
                        waiting.cancel()
                        with contextlib.suppress(BaseException):
                            await waiting
            if cut.done() and not cut.cancelled():
                raise ConnectionResetError("severed by the test")
            try:
                line = next_line.result()
            except StopAsyncIteration:
                return
            yield line

    async def sever(self) -> None:
        """Cut the watches and hold every new call until `restore`."""
        self.open.clear()
        self._cut.set()
        await asyncio.sleep(0.1)  # let the open watches see the cut before the test writes

    def restore(self) -> None:
        self._cut.clear()
        self.open.set()


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def podtemplate(name: str) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    return {"metadata": {"name": name}, "template": {"metadata": {}, "spec": spec}}


async def until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 -- polls a store fed by another task
            await asyncio.sleep(0.05)


def server_state(apiserver: ApiServer, path: str) -> dict[str, str]:
    items = apiserver.request("GET", path)["items"]
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items}


def cache_state(informer: Informer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store}


class Journal:
    """Handler calls, as ("add" | "update" | "delete", name, resourceVersion)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, str]] = []

    def __call__(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        kind = "add" if old is None else "delete" if new is None else "update"
        meta = (new or old or {})["metadata"]
        self.entries.append((kind, meta["name"], meta["resourceVersion"]))

    def names(self, kind: str) -> Counter[str]:
        return Counter(name for k, name, _ in self.entries if k == kind)


def journaled(
    transport: ListWatchTransport, resource: Resource, namespace: str, **options: Any
) -> tuple[Informer, Journal]:
    """An informer of `resource` in `namespace`, its handler calls recorded in a Journal."""
    journal = Journal()
    informer = Informer(
        transport, resource, clock=LoopClock(), selection=Selection(namespace=namespace), **options
    )
    informer.add_handler(journal)
    return informer, journal


async def test_list_then_watch_fills_the_store_and_the_indexes(
    apiserver: ApiServer, namespace: str, transport: Transport
) -> None:
    path = CONFIGMAPS.path(namespace)
    apiserver.request("POST", path, configmap("before", app="x"))
    informer, journal = journaled(
        transport, CONFIGMAPS, namespace, indexers={"app": label_index("app")}
    )
    async with informer:
        await informer.wait_synced()
        assert cache_state(informer) == server_state(apiserver, path)
        apiserver.request("POST", path, configmap("after", app="x"))
        apiserver.request("PATCH", f"{path}/before", {"data": {"k": "2"}}, MERGE)
        apiserver.request("DELETE", f"{path}/after")
        await until(lambda: journal.names("delete")["after"] == 1)
        assert cache_state(informer) == server_state(apiserver, path)
        assert [o["metadata"]["name"] for o in informer.store.by_index("app", "x")] == ["before"]
        [cached] = informer.store
        assert "managedFields" not in cached["metadata"]
        assert cached["kind"] == "ConfigMap"
    assert [(kind, name) for kind, name, _ in journal.entries] == [
        ("add", "before"),
        ("add", "after"),
        ("update", "before"),
        ("delete", "after"),
    ]


async def test_a_paged_relist_sees_every_object(
    apiserver: ApiServer, namespace: str, transport: Transport
) -> None:
    path = CONFIGMAPS.path(namespace)
    for n in range(25):
        apiserver.request("POST", path, configmap(f"m{n:02}"))
    selection = Selection(namespace=namespace, page_size=4)
    stream = reflect(
        transport, CONFIGMAPS, clock=LoopClock(), selection=selection, watch_list=False
    )
    listed = await anext(stream)
    await stream.aclose()
    assert isinstance(listed, Listed)
    assert sorted(o["metadata"]["name"] for o in listed.objects) == [f"m{n:02}" for n in range(25)]


@pytest.mark.parametrize("watch_list", [True, False], ids=["streaming", "paged"])
async def test_a_metadata_only_informer_holds_no_secret_data(
    apiserver: ApiServer, namespace: str, transport: Transport, watch_list: bool
) -> None:
    path = SECRETS.path(namespace)
    body = {"metadata": {"name": "s1", "annotations": {"a": "1"}}, "stringData": {"k": "hush"}}
    apiserver.request("POST", path, body)
    severable = Severable(transport)
    selection = Selection(namespace=namespace, metadata_only=True, page_size=1)
    informer = Informer(
        severable, SECRETS, clock=LoopClock(), selection=selection, watch_list=watch_list
    )
    async with informer:
        await informer.wait_synced()
        apiserver.request("POST", path, body | {"metadata": {"name": "s2"}})
        await until(lambda: len(informer.store) == 2)
        assert cache_state(informer) == server_state(apiserver, path)
        for cached in informer.store:
            assert cached["kind"] == "PartialObjectMetadata"
            assert set(cached) == {"kind", "apiVersion", "metadata"}
        first = informer.store.get(f"{namespace}/s1")
        assert first is not None
        assert first["metadata"]["annotations"] == {"a": "1"}
    # A streaming list opens with a watch from no version; a paged one with a list.
    assert (severable.watch_versions[0] == "list") is watch_list


async def test_relist_after_compaction_delivers_what_changed_meanwhile(
    apiserver: ApiServer, namespace: str, transport: Transport
) -> None:
    path = PODTEMPLATES.path(namespace)
    for name in ("keep", "vanish"):
        apiserver.request("POST", path, podtemplate(name))
    severable = Severable(transport)
    informer, journal = journaled(severable, PODTEMPLATES, namespace)
    async with informer:
        await informer.wait_synced()
        seen = informer.store.resource_version
        await severable.sever()
        apiserver.request("DELETE", f"{path}/vanish")
        apiserver.request("POST", path, podtemplate("new"))
        apiserver.request("PATCH", f"{path}/keep", {"metadata": {"labels": {"a": "b"}}}, MERGE)
        assert apiserver.etcd_compact() > int(seen) + 1
        severable.restore()
        await until(lambda: cache_state(informer) == server_state(apiserver, path))
    # A streaming list, cut; the re-watch from `seen` met 410 and the reflector listed again.
    assert severable.watch_versions[:3] == ["list", seen, "list"]
    assert journal.names("delete") == Counter({"vanish": 1})
    assert journal.names("add") == Counter({"keep": 1, "vanish": 1, "new": 1})
    assert journal.names("update") == Counter({"keep": 1})


async def test_bookmarks_advance_the_version_watched_from(
    apiserver: ApiServer,
    namespace: str,
    transport: Transport,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Bookmarks come 2 s before a watch's deadline: make the deadline near.
    monkeypatch.setattr(reflector_module, "WATCH_SECONDS_MIN", 5)
    monkeypatch.setattr(reflector_module, "WATCH_SECONDS_MAX", 5)
    path = CONFIGMAPS.path(namespace)
    severable = Severable(transport)
    selection = Selection(namespace=namespace, label_selector="watched=yes")
    # A plain list then watch: the bookmarks of interest are those of a watch from a list.
    stream = reflect(
        severable, CONFIGMAPS, clock=LoopClock(), selection=selection, watch_list=False
    )
    # (delta, how many watches had been opened when it arrived)
    received: list[tuple[object, int]] = []
    excluded: list[int] = []

    async def consume() -> None:
        async for delta in stream:
            received.append((delta, len(severable.watch_versions)))

    async def write_unwatched() -> None:
        # Writes the selector excludes: no events, but the resource's revision moves on,
        # which is what makes the server send bookmarks. They start after the list.
        await until(lambda: bool(received))
        for n in range(60):
            body = configmap(f"other-{n}", watched="no")
            created = await asyncio.to_thread(apiserver.request, "POST", path, body)
            excluded.append(int(created["metadata"]["resourceVersion"]))
            await asyncio.sleep(1)

    async with asyncio.TaskGroup() as group:
        consumer = group.create_task(consume())
        writer = group.create_task(write_unwatched())
        await until(lambda: len(severable.watch_versions) >= 2, seconds=40)
        consumer.cancel()
        writer.cancel()
    listed = received[0][0]
    assert isinstance(listed, Listed)
    on_first_watch = [delta for delta, watches in received if watches == 1]
    assert on_first_watch, "the first watch ended without a bookmark"
    assert all(isinstance(delta, Bookmark) for delta in on_first_watch)
    last = on_first_watch[-1]
    assert isinstance(last, Bookmark)
    assert int(last.resource_version) >= excluded[0] > int(listed.resource_version)
    # The next watch starts from the bookmark, not from the list.
    assert severable.watch_versions[:2] == [listed.resource_version, last.resource_version]


async def test_reconnect_after_an_api_server_restart_loses_and_duplicates_nothing(
    apiserver: ApiServer, namespace: str, transport: Transport
) -> None:
    path = CONFIGMAPS.path(namespace)
    for name in ("a", "b", "c"):
        apiserver.request("POST", path, configmap(name))
    informer, journal = journaled(transport, CONFIGMAPS, namespace)
    async with informer:
        await informer.wait_synced()
        apiserver.request("POST", path, configmap("d"))
        await until(lambda: "d" in journal.names("add"))
        await asyncio.to_thread(apiserver.restart_apiserver)
        apiserver.request("DELETE", f"{path}/a")
        apiserver.request("PATCH", f"{path}/b", {"data": {"k": "2"}}, MERGE)
        apiserver.request("POST", path, configmap("e"))
        await until(lambda: cache_state(informer) == server_state(apiserver, path), 60)
        apiserver.request("POST", path, configmap("f"))
        await until(lambda: "f" in journal.names("add"))
    assert journal.names("add") == Counter({n: 1 for n in "abcdef"})
    assert journal.names("delete") == Counter({"a": 1})
    assert journal.names("update") == Counter({"b": 1})
