"""Two controller shards on the real API server, split by --watch-label-selector."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from controller.core.basics.names import LABEL_UID, MANAGED_BY, state_secret_name
from controller.io.caches import Caches
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import MERGE, Kube, eventually, running_controller

pytestmark = pytest.mark.kube
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
    # What each shard made carries its object's shard label, so the other shard's Job
    # and Secret informers never list it.
    for name, key in (("a", "shard1"), ("b", "shard2")):
        (job,) = await applying(name)
        assert job["metadata"]["labels"][SHARD_KEY] == key
        assert job["spec"]["template"]["metadata"]["labels"][SHARD_KEY] == key
        env = {e["name"]: e.get("value") for e in job_container(job)["env"]}
        assert env["CAPTF_SHARD_LABELS"] == f"{SHARD_KEY}={key}"
        inputs = await kube.secret(env["CAPTF_INPUTS_SECRET"])
        assert inputs["metadata"]["labels"][SHARD_KEY] == key
        assert inputs["metadata"]["labels"]["captf.io/managed-by"] == "captf"


def job_container(job: Json) -> Json:
    container: Json = job["spec"]["template"]["spec"]["containers"][0]
    return container


def _job(name: str, labels: dict[str, str]) -> Json:
    container = {"name": "runner", "image": "captf:dev"}
    pod = {"restartPolicy": "Never", "containers": [container]}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"template": {"spec": pod}}}


async def test_a_shards_caches_hold_its_own_jobs_and_secrets_and_every_users_secret(
    apiserver: ApiServer, namespace: str
) -> None:
    secrets = f"/api/v1/namespaces/{namespace}/secrets"
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    apiserver.request("POST", secrets, {"metadata": {"name": "creds"}})
    for name, key in (("a", "shard1"), ("b", "shard2")):
        labels = {SHARD_KEY: key, "captf.io/name": name, "captf.io/kind": "TerraformCluster"}
        state = state_secret_name(namespace, "TerraformCluster", name)
        apiserver.request(
            "POST", secrets, {"metadata": {"name": state, "labels": labels | MANAGED_BY}}
        )
        apiserver.request("POST", jobs, _job(f"{name}-apply-1", labels | {LABEL_UID: name}))
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        caches = Caches(
            transport, clock=LoopClock(), namespace=namespace, label_selector=shard("shard1")
        )
        async with contextlib.AsyncExitStack() as stack:
            for informer in (caches.jobs, caches.secrets, caches.own_secrets):
                await stack.enter_async_context(informer)
                await informer.wait_synced()
            assert [j["metadata"]["name"] for j in caches.jobs.store] == ["a-apply-1"]
            own = [s["metadata"]["name"] for s in caches.own_secrets.store]
            assert own == [state_secret_name(namespace, "TerraformCluster", "a")]
            assert "creds" in [s["metadata"]["name"] for s in caches.secrets.store]


async def _has_status(kube: Kube, name: str) -> bool:
    return bool((await kube.cluster(name)).get("status"))
