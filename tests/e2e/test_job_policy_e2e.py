"""Runs on the management clusters platform teams have, end to end (real API server,
kube-controller-manager, process node, OpenTofu): a namespace that enforces the
restricted Pod Security profile and a ResourceQuota on requests and limits runs an
apply as it is; a change to the runner pod's resources or tolerations applies nothing;
a runner image in a registry that wants credentials is pulled with the object's
imagePullSecrets."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import pytest_asyncio

from runtime.envtest import ApiServer
from runtime.envtest.client import RequestFailed
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from tests.e2e.system import (
    RUNNER_ACCOUNT,
    System,
    ended,
    in_background,
    result_of,
    running_system,
)
from tests.e2e.test_module_image_e2e import CLUSTER_MODULE, build_role
from tests.kube.harness import MERGE
from tests.registry_support import REGISTRY_USER, dockerconfigjson, layer, push

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
QUOTA = {"requests.cpu": "2", "requests.memory": "2Gi", "limits.cpu": "4", "limits.memory": "8Gi"}


def _pod(name: str, container: Json, context: Json | None = None) -> Json:
    spec: Json = {"restartPolicy": "Never", "containers": [container]}
    if context is not None:
        spec["securityContext"] = context
    return {"metadata": {"name": name}, "spec": spec}


async def _refused(system: System, pod: Json) -> str:
    """Why the API server refuses a dry-run create of `pod` in the test's namespace."""
    path = f"/api/v1/namespaces/{system.kube.ns}/pods?dryRun=All"
    with pytest.raises(RequestFailed) as refused:
        await system.kube.call("POST", path, pod)
    assert refused.value.status == 403, refused.value
    return refused.value.message


async def restrict(system: System) -> None:
    """Labels the test's namespace to enforce the restricted profile and gives it a quota
    on requests and limits; shows that both refuse what they should."""
    kube = system.kube
    await kube.call(
        "PATCH", f"/api/v1/namespaces/{kube.ns}", {"metadata": {"labels": RESTRICTED}}, MERGE
    )
    quota = {"metadata": {"name": "runners"}, "spec": {"hard": QUOTA}}
    await kube.call("POST", f"/api/v1/namespaces/{kube.ns}/resourcequotas", quota)
    # Both bite: a pod with no securityContext, and a restricted one with no requests.
    plain = {"name": "c", "image": "captf:dev"}
    assert "violates PodSecurity" in await _refused(system, _pod("plain", plain))
    hardened = plain | {
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
    }
    context = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    message = await _refused(system, _pod("bare", hardened, context))
    assert "must specify" in message
    assert "requests.cpu" in message


async def test_a_restricted_namespace_with_a_quota_runs_an_apply_and_a_pod_change_applies_nothing(
    system: System,
) -> None:
    kube = system.kube
    await restrict(system)
    await kube.setup_cluster("q1", jobs={"serviceAccountName": RUNNER_ACCOUNT})
    job = await system.finished_job("q1", "apply", 1)
    assert ended(job) == "Complete", system.log(job)
    assert result_of(job)["outcome"] == "succeeded", system.log(job)
    [runner] = job["spec"]["template"]["spec"]["containers"]
    assert runner["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "2Gi"},
    }

    async def idle() -> Json | None:
        obj = await kube.get("terraformclusters", "q1")
        status = obj.get("status") or {}
        current = status.get("observedGeneration") == obj["metadata"]["generation"]
        return status if current and (status.get("next") or {}).get("op") is None else None

    before = await system.until(idle, "q1 idle after its apply")
    change = {
        "resources": {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "terraform"}],
    }
    patched = await kube.call(
        "PATCH", kube.captf_path("terraformclusters", "q1"), {"spec": {"jobs": change}}, MERGE
    )
    assert patched["metadata"]["generation"] > 1
    after = await system.until(idle, "q1 decided on its new generation")
    assert after["inputsHash"] == before["inputsHash"]
    applies = [j for j in await kube.jobs() if j["metadata"]["labels"]["captf.io/op"] == "apply"]
    assert [j["metadata"]["name"] for j in applies] == [job["metadata"]["name"]]


@pytest_asyncio.fixture(loop_scope="function")
async def pull_system(
    tofu_build: Path,
    registry_build: Path,
    auth_registry: Registry,
    cluster: ApiServer,
    cluster_namespace: str,
    tmp_path: Path,
) -> AsyncIterator[System]:
    """The e2e system whose node pulls with crane, allowing runner images of the registry
    that wants credentials."""
    running = running_system(
        cluster,
        cluster_namespace,
        tmp_path,
        tofu_build,
        registry_build / "crane",
        allowed_images=f"captf:dev,{auth_registry.host}/*",
    )
    started, stop = await in_background(running)
    try:
        yield started
    finally:
        await stop()


async def test_a_runner_image_is_pulled_with_the_object_s_pull_secret(
    pull_system: System, auth_registry: Registry, tmp_path: Path
) -> None:
    system, kube = pull_system, pull_system.kube
    docker = tmp_path / "docker"
    docker.mkdir()
    config = dockerconfigjson(auth_registry.host, *REGISTRY_USER)
    (docker / "config.json").write_text(config)
    # The runner image's repository is .../captf: the node runs this checkout's captf for
    # it, once the pull succeeded (docs/node.md).
    repo = f"{kube.ns}-{uuid.uuid4().hex[:6]}/captf"
    files = [layer(tmp_path / "l.tar.gz", {"README": b"the runner image\n"})]
    push(auth_registry, f"{repo}:v1", files, docker_config=docker)
    # Another tag for the object without the Secret: the node reuses a pulled image for
    # any pod under IfNotPresent, as a kubelet does.
    push(auth_registry, f"{repo}:v2", files, docker_config=docker)
    secret = {
        "metadata": {"name": "regcred"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config},
    }
    await kube.call("POST", f"/api/v1/namespaces/{kube.ns}/secrets", secret)
    image = f"{auth_registry.host}/{repo}:v1"
    jobs = {
        "image": image,
        "serviceAccountName": RUNNER_ACCOUNT,
        "imagePullSecrets": [{"name": "regcred"}],
    }
    await kube.setup_cluster("pulled", jobs=jobs)
    without = {"image": f"{auth_registry.host}/{repo}:v2", "serviceAccountName": RUNNER_ACCOUNT}
    await kube.setup_cluster("unpulled", jobs=without)
    job = await system.finished_job("pulled", "apply", 1)
    assert result_of(job)["outcome"] == "succeeded", system.log(job)
    pod = job["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["containers"][0]["image"] == image

    async def cannot_pull() -> str | None:
        status = (await kube.get("terraformclusters", "unpulled")).get("status") or {}
        reason = (status.get("next") or {}).get("reason")
        return reason if reason == "ImagePullBackOff" else None

    # Without the Secret the same registry refuses the pull, and the object says so.
    assert await system.until(cannot_pull, "unpulled: ImagePullBackOff") == "ImagePullBackOff"


async def test_a_module_image_runs_in_a_restricted_namespace_with_a_quota(
    pull_system: System, registry: Registry
) -> None:
    system, kube = pull_system, pull_system.kube
    await restrict(system)
    tag = f"{registry.host}/{kube.ns}/cluster:1"
    digest = await anyio.to_thread.run_sync(build_role, CLUSTER_MODULE, "cluster", tag)
    jobs = {"serviceAccountName": RUNNER_ACCOUNT}
    await kube.setup_cluster("img", files={}, jobs=jobs, variables={}, source={"image": tag})
    job = await system.finished_job("img", "apply", 1)
    assert result_of(job)["outcome"] == "succeeded", system.log(job)
    volumes = job["spec"]["template"]["spec"]["volumes"]
    pinned = {"reference": f"{registry.host}/{kube.ns}/cluster@{digest}"}
    assert [v["image"]["reference"] for v in volumes if "image" in v] == [pinned["reference"]]
