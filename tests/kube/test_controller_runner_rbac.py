"""The runner's RBAC on the real API server: in a namespace where nothing was applied by
hand, the controller provides captf-runner and its binding before the first Job; an
override account the operator allows still runs no Job until it opts in by label."""

from __future__ import annotations

import pytest

from runtime.clock import SteppedClock
from runtime.envtest import ApiServer, RequestFailed
from tests.kube.harness import Kube, condition_is, eventually, nth_job, running_controller

pytestmark = pytest.mark.kube
RBAC = "/apis/rbac.authorization.k8s.io/v1"


async def test_a_fresh_namespace_gets_the_runner_account_before_its_first_job(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster()
    async with running_controller(apiserver, namespace):
        job = await nth_job(kube, 1)
        account = await kube.call(
            "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/captf-runner"
        )
        binding = await kube.call("GET", f"{RBAC}/namespaces/{namespace}/rolebindings/captf-runner")
        ready = await condition_is(kube, "RunnerRBACReady", "True", "Provided")
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "captf-runner"
    # Created before the Job: the Job controller never finds its account missing.
    assert account["metadata"]["creationTimestamp"] <= job["metadata"]["creationTimestamp"]
    assert binding["metadata"]["creationTimestamp"] <= job["metadata"]["creationTimestamp"]
    for obj in (account, binding):
        labels = obj["metadata"]["labels"]
        assert labels["captf.io/managed-by"] == "captf"
        assert labels["captf.io/runner-rbac"] == "managed"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "captf-runner",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "captf-runner", "namespace": namespace}
    ]
    assert "captf-runner" in ready["message"]


async def test_an_override_account_runs_no_job_until_it_opts_in(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    await kube.call("POST", accounts, {"metadata": {"name": "deployer"}})
    await kube.setup_cluster(jobs={"serviceAccountName": "deployer"})
    allowed = "captf-runner,deployer"
    # A clock that stands still: only the label's watch event can wake the object.
    clock = SteppedClock()
    async with running_controller(
        apiserver, namespace, clock=clock, allowed_service_accounts=allowed
    ):
        refused = await condition_is(kube, "RunnerRBACReady", "False", "ServiceAccountNotOptedIn")
        assert "captf.io/runner=true" in refused["message"]
        await condition_is(kube, "Waiting", "True", "RunnerRBACNotReady")
        assert await kube.jobs() == []
        # Nothing was provided for it: an override account's rights are its owner's.
        with pytest.raises(RequestFailed) as missing:
            await kube.call("GET", f"{accounts}/captf-runner")
        assert missing.value.status == 404
        # The opt-in label wakes the object (no requeue interval passes: the clock stands).
        opt_in = {"metadata": {"labels": {"captf.io/runner": "true"}}}
        await kube.call("PATCH", f"{accounts}/deployer", opt_in, "application/merge-patch+json")
        job = await nth_job(kube, 1)
        assert job["spec"]["template"]["spec"]["serviceAccountName"] == "deployer"
        await condition_is(kube, "RunnerRBACReady", "True", "OptedIn")

        async def no_runner_account() -> bool:
            found = await kube.call("GET", accounts)
            return all(a["metadata"]["name"] != "captf-runner" for a in found["items"])

        assert await eventually(no_runner_account, what="no captf-runner created")
