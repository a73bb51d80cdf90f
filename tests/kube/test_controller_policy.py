"""The operator's runner policy on the real API server: an object asking for an image or
a service account the controller's flags do not allow waits with JobPolicyInvalid naming
the flag, and starts once the object asks for what is allowed."""

from __future__ import annotations

import pytest

from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    MERGE,
    Kube,
    condition,
    condition_is,
    eventually,
    nth_job,
    running_controller,
)

pytestmark = pytest.mark.kube
CLUSTERS = "terraformclusters"


async def test_an_image_outside_the_policy_is_refused_with_the_flag(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster(jobs={"image": "evil.example/miner:1"})
    async with running_controller(apiserver, namespace):
        ready = await condition_is(kube, "Ready", "False", "JobPolicyInvalid")
        assert "--allowed-images=captf:dev" in ready["message"]
        assert await kube.jobs() == []
        asks: Json = {"spec": {"jobs": {"image": "captf:dev", "serviceAccountName": "admin"}}}
        await kube.call("PATCH", kube.captf_path(CLUSTERS, "c1"), asks, MERGE)
        await _message_has(kube, "--allowed-service-accounts=captf-runner")
        unnamed: Json = {"spec": {"jobs": {"serviceAccountName": None}}}
        await kube.call("PATCH", kube.captf_path(CLUSTERS, "c1"), unnamed, MERGE)
        job = await nth_job(kube, 1)
        # Named by nobody: the operator's first allowed account.
        assert job["spec"]["template"]["spec"]["serviceAccountName"] == "captf-runner"


async def _message_has(kube: Kube, text: str) -> None:
    async def probe() -> bool:
        cond = condition(await kube.cluster(), "Ready") or {}
        return text in str(cond.get("message"))

    await eventually(probe, what=f"Ready message with {text}")
