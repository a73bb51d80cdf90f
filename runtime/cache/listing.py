"""A full list of a collection, page by page, as one consistent snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.cache.resource import Obj, Transform
from runtime.errors import ApiError

# client-go's pager default: large enough for few round trips, small enough
# that one page never holds the API server's memory for long.
PAGE_SIZE = 500
# A continue token that expired mid-list (410) means the pages are no longer one
# snapshot; the list restarts from the first page, a few times at most.
MAX_RESTARTS = 3


class ListTransport(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Listed:
    """Every object of the collection at `resource_version`."""

    objects: list[Obj]
    resource_version: str


async def list_all(
    transport: ListTransport,
    path: str,
    *,
    resource_version: str,
    selectors: Mapping[str, str],
    page_size: int = PAGE_SIZE,
    transform: Transform | None = None,
    accept: str = "application/json",
) -> Listed:
    """All pages of one list, each object passed through `transform` as its page arrives.

    `resource_version` "" asks for a consistent, most recent read, which honours the
    limit; a version with a limit reads exactly that snapshot (benchmarks do). The
    reflector never asks for "0": the watch cache answers it ignoring the limit, in
    one unbounded body."""
    pages = _Pages(transport, path, selectors, page_size, transform, accept)
    for _ in range(MAX_RESTARTS):
        try:
            return await pages.read(resource_version)
        except ApiError as error:
            if error.status != 410:
                raise
            # Only a continued page can meet 410 here: restart with a fresh snapshot.
            resource_version = ""
    return await pages.read(resource_version)


@dataclass(frozen=True, slots=True)
class _Pages:
    transport: ListTransport
    path: str
    selectors: Mapping[str, str]
    page_size: int
    transform: Transform | None
    accept: str

    async def read(self, resource_version: str) -> Listed:
        params = {**self.selectors, "limit": str(self.page_size)}
        if resource_version:
            params["resourceVersion"] = resource_version
        objects: list[Obj] = []
        while True:
            page = await self.transport.request("GET", self.path, params=params, accept=self.accept)
            self._add_items(objects, page)
            metadata = page.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                return Listed(objects, metadata.get("resourceVersion") or "")
            # A continued page is pinned to the first page's snapshot by the token itself;
            # the API server rejects a resourceVersion next to it.
            params = {**self.selectors, "limit": str(self.page_size), "continue": token}

    def _add_items(self, objects: list[Obj], page: dict[str, Any]) -> None:
        # List items carry no kind/apiVersion; watch events do. Fill them in so
        # every object in the cache looks the same whichever way it arrived.
        kind = str(page.get("kind") or "").removesuffix("List")
        api_version = page.get("apiVersion")
        transform = self.transform
        for item in page.get("items") or ():
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
            objects.append(item if transform is None else transform(item))
