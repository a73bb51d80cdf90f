"""variablesFrom configMapRef on the real API server: the schema takes exactly one of
secretRef and configMapRef, and a changed ConfigMap re-applies with the new inputs."""

from __future__ import annotations

import base64

import orjson
import pytest

from controller.core.basics.names import CLUSTER, inputs_secret_prefix
from runtime.envtest import ApiServer, RequestFailed
from tests.kube.harness import (
    MERGE,
    Kube,
    condition_is,
    controller_on,
    job_notes,
    new_job,
    nth_job,
    succeed_apply,
)

pytestmark = pytest.mark.kube
CLUSTERS = "terraformclusters"


@pytest.mark.parametrize(
    "entry",
    [{}, {"secretRef": {"name": "a"}, "configMapRef": {"name": "b"}}],
)
async def test_each_entry_names_exactly_one_source(
    apiserver: ApiServer, namespace: str, entry: dict[str, object]
) -> None:
    with pytest.raises(RequestFailed) as info:
        await Kube(apiserver, namespace).setup_cluster(variablesFrom=[entry])
    assert info.value.status == 422
    assert "exactly one of secretRef and configMapRef" in info.value.message


async def test_a_changed_configmap_reapplies(apiserver: ApiServer, namespace: str) -> None:
    kube = Kube(apiserver, namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    await kube.call("POST", path, {"metadata": {"name": "sizes"}, "data": {"size": "2"}})
    async with controller_on(
        apiserver,
        namespace,
        variablesFrom=[{"configMapRef": {"name": "sizes", "key": "size"}}],
        guard={"allowDestructive": True},
    ) as (kube, clock):
        first = await nth_job(kube, 1)
        await succeed_apply(kube, first, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        await kube.call("PATCH", f"{path}/sizes", {"data": {"size": "5"}}, MERGE)
        second = await new_job(kube, first)
        notes = job_notes(second)
        assert notes["captf.io/inputs-hash"] != job_notes(first)["captf.io/inputs-hash"]
        prefix = inputs_secret_prefix(kube.ns, CLUSTER, "c1")
        inputs = await kube.secret(f"{prefix}{notes['captf.io/inputs-hash'][:8]}")
        variables = orjson.loads(base64.b64decode(inputs["data"]["variables.json"]))
        assert variables["size"] == "5"
