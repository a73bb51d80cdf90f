"""Two controller shards on the real API server, split by --watch-label-selector."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime.envtest import ApiServer
from tests.kube.harness import MERGE, Kube, eventually, running_controller

pytestmark = pytest.mark.kube
Json = dict[str, Any]
SHARD_KEY = "sharding.captf.io/key"


def shard(name: str) -> str:
    return f"{SHARD_KEY} in ({name})"


async def test_each_shard_reconciles_only_its_own_objects(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    for name, key in (("a", "shard1"), ("b", "shard2")):
        await kube.setup_cluster(name)
        path = kube.captf_path("terraformclusters", name)
        await kube.call("PATCH", path, {"metadata": {"labels": {SHARD_KEY: key}}}, MERGE)

    async def applying(name: str) -> list[Json]:
        return await kube.jobs(f"captf.io/name={name},captf.io/op=apply")

    async with running_controller(apiserver, namespace, watch_label_selector=shard("shard1")):
        await eventually(lambda: applying("a"), what="shard1 starts a's apply")
        await eventually(lambda: _has_status(kube, "a"), what="shard1 writes a's status")
        # Long enough for shard1 to have reconciled b, had it seen it.
        await asyncio.sleep(2)
        b = await kube.cluster("b")
        assert "status" not in b
        assert not b["metadata"].get("finalizers")
        assert await applying("b") == []
    async with (
        running_controller(apiserver, namespace, watch_label_selector=shard("shard1")),
        running_controller(apiserver, namespace, watch_label_selector=shard("shard2")),
    ):
        await eventually(lambda: applying("b"), what="shard2 starts b's apply")
        await eventually(lambda: _has_status(kube, "b"), what="shard2 writes b's status")
    assert len(await applying("a")) == 1
    assert len(await applying("b")) == 1


async def _has_status(kube: Kube, name: str) -> bool:
    return bool((await kube.cluster(name)).get("status"))
