"""kubernetes_asyncio's own typed client, kept only as the yardstick for benchmarks.

The controller never uses this: it reads raw JSON through `runtime.transport`.
`captf bench watch` and `captf bench scale` measure the generated models and
`watch.Watch` on the same server and the same events. This is the one module
outside the transport allowed to import kubernetes_asyncio (see the import
contracts): a yardstick is only honest as its users would write it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kubernetes_asyncio import client as typed_client
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio import watch as typed_watch


class TypedJobs:
    """BatchV1Api on one namespace: models out, as a kubernetes_asyncio user would write it."""

    def __init__(self, api: Any, namespace: str) -> None:
        self._api = api
        self._namespace = namespace

    async def list(self, *, resource_version: str, exact: bool = False) -> tuple[list[Any], str]:
        """The Jobs as V1Job models, and the list's resourceVersion."""
        listed = await self._api.list_namespaced_job(
            self._namespace,
            resource_version=resource_version,
            resource_version_match="Exact" if exact else None,
        )
        return listed.items, listed.metadata.resource_version

    async def watch(self, *, resource_version: str, count: int) -> AsyncIterator[dict[str, Any]]:
        """`count` events from `resource_version` as `watch.Watch` yields them (models inside)."""
        stream = typed_watch.Watch()
        seen = 0
        async with stream:
            async for event in stream.stream(
                self._api.list_namespaced_job,
                self._namespace,
                resource_version=resource_version,
                timeout_seconds=300,
            ):
                yield event
                seen += 1
                if seen == count:
                    return


@asynccontextmanager
async def open_typed_jobs(kubeconfig: str | None, namespace: str) -> AsyncIterator[TypedJobs]:
    configuration = typed_client.Configuration()
    await kube_config.load_kube_config(
        config_file=kubeconfig, client_configuration=configuration, persist_config=False
    )
    async with typed_client.ApiClient(configuration) as api_client:
        yield TypedJobs(typed_client.BatchV1Api(api_client), namespace)


async def count_typed_jobs(kubeconfig: str | None, label_selector: str) -> int:
    """Every Job of the cluster the selector matches, as V1Job models held at once, as a
    kubernetes_asyncio user lists them (pages of 500); returns how many."""
    configuration = typed_client.Configuration()
    await kube_config.load_kube_config(
        config_file=kubeconfig, client_configuration=configuration, persist_config=False
    )
    held: list[Any] = []
    async with typed_client.ApiClient(configuration) as api_client:
        api = typed_client.BatchV1Api(api_client)
        more: dict[str, Any] = {}
        while True:
            page = await api.list_job_for_all_namespaces(
                label_selector=label_selector, limit=500, **more
            )
            held.extend(page.items)
            token = page.metadata._continue
            if not token:
                return len(held)
            more = {"_continue": token}
