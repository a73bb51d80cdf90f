"""The copy shape of a module image Job, end to end, on an API server whose image volumes
are turned off (`--feature-gates=ImageVolume=false`, as on the clusters before v1.35 that
most platform teams run). The controller runs with the default `--module-image-mount=auto`:
its dry-run Job shows that the API server drops image volumes, so it takes the copy shape
although the version is v1.35. The runner image's static copier goes into an emptyDir, the
module image (by digest) runs it to copy /captf into another, and the runner applies
from there. Apply, the pin, a moved tag, a machine's drift and destroy on its pin: the
same as with image volumes (tests/e2e/test_module_image_e2e.py)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
import pytest_asyncio

from controller.core.basics.names import CLUSTER, inputs_secret_prefix
from controller.dev.clusterapi import install_crds_only
from controller.dev.node.main import copier
from runtime.envtest import ApiServer
from runtime.envtest.process import terminate_as_interrupt
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from tests.conftest import CRD_DIR, _new_namespace
from tests.e2e.system import RUNNER_ACCOUNT, System, in_background, result_of, running_system
from tests.e2e.test_job_policy_e2e import restrict
from tests.e2e.test_module_image_e2e import (
    CLUSTER_MODULE,
    MACHINE_MODULE,
    build_role,
    changed_copy,
    hash_of,
)

pytestmark = [pytest.mark.e2e, pytest.mark.kube]


@pytest.fixture(scope="module")
def legacy_cluster() -> Iterator[ApiServer]:
    """A control plane (kube-controller-manager included) that refuses image volumes."""
    gate = "--feature-gates=ImageVolume=false"
    with terminate_as_interrupt(), ApiServer(controller_manager=True, extra_flags=[gate]) as server:
        server.install_crds(CRD_DIR)
        install_crds_only(server, server.workdir / "capi")
        yield server


@pytest_asyncio.fixture(loop_scope="function")
async def copy_system(
    tofu_build: Path,
    registry_build: Path,
    legacy_cluster: ApiServer,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> AsyncIterator[System]:
    found = copier()
    if found is None:
        pytest.skip("no copier build (hack/copier/build.sh needs Go)")
    namespace = _new_namespace(legacy_cluster, request)
    system = running_system(
        legacy_cluster,
        namespace,
        tmp_path,
        tofu_build,
        registry_build / "crane",
        copier=found,
        module_image_mount="auto",
    )
    started, stop = await in_background(system)
    try:
        yield started
    finally:
        await stop()


def copied_from(job: Json) -> str:
    """The module image the Job's copy init container ran (and no image volume)."""
    pod = job["spec"]["template"]["spec"]
    assert not [v for v in pod["volumes"] if "image" in v]
    [copy] = [c for c in pod["initContainers"] if c["name"] == "copy-module"]
    return str(copy["image"])


async def test_the_copy_shape_applies_pins_follows_a_moved_tag_and_destroys_on_its_pin(
    copy_system: System, registry: Registry, tmp_path: Path
) -> None:
    system, kube = copy_system, copy_system.kube
    # The volume shape cannot work here: the API server drops an image volume (and the
    # mounts of it) from what it stores.
    stored = await kube.call(
        "POST",
        f"/apis/batch/v1/namespaces/{kube.ns}/jobs?dryRun=All",
        _image_volume_job(f"{registry.host}/{kube.ns}/x:1"),
    )
    assert not stored["spec"]["template"]["spec"].get("volumes"), stored

    # A namespace that enforces the restricted profile and a quota: the init containers
    # are admitted as the runner is.
    await restrict(system)
    repo = f"{registry.host}/{kube.ns}"
    cluster_tag, machine_tag = f"{repo}/pin-cluster:1", f"{repo}/pin-machine:1"
    c1 = await anyio.to_thread.run_sync(build_role, CLUSTER_MODULE, "cluster", cluster_tag)
    m1 = await anyio.to_thread.run_sync(build_role, MACHINE_MODULE, "machine", machine_tag)
    jobs = {"serviceAccountName": RUNNER_ACCOUNT}
    drift = {"interval": "5m"}  # 5 s of the test's time
    await kube.setup_cluster(
        "pin", files={}, jobs=jobs, variables={}, source={"image": cluster_tag}, drift=drift
    )
    first = await system.finished_job("pin", "apply", 1)
    assert result_of(first)["outcome"] == "succeeded", system.log(first)
    assert copied_from(first) == f"{repo}/pin-cluster@{c1}"
    assert first["metadata"]["annotations"]["captf.io/module-image-mount"] == "copy"
    # OpenTofu came from the image, through the copy.
    ran_with = next(line for line in system.log(first).splitlines() if "module image:" in line)
    assert "/captf/runtime, CLI config " in ran_with
    inputs = await kube.secret(
        f"{inputs_secret_prefix(kube.ns, CLUSTER, 'pin')}{hash_of(first)[:8]}"
    )
    assert base64.b64decode(inputs["data"]["image.digest"]).decode() == c1

    async def shows_mount() -> Json | None:
        status = (await kube.get("terraformclusters", "pin")).get("status") or {}
        image: Json | None = status.get("image")
        return image if image and image.get("mount") else None

    shown = await system.until(shows_mount, "status.image of pin")
    assert shown == {"reference": cluster_tag, "digest": c1, "mount": "copy"}

    machine = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformMachine",
        "metadata": {"name": "pin-m"},
        "spec": {
            "source": {"image": machine_tag},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"} | jobs,
            "drift": drift,
            "guard": {"allowDestructive": True},
        },
    }
    await kube.create_member(machine, cluster="pin")
    applied = await system.finished_job("pin-m", "apply", 1)
    assert result_of(applied)["outcome"] == "succeeded", system.log(applied)
    assert copied_from(applied) == f"{repo}/pin-machine@{m1}"

    # Both tags move to new content.
    c2 = await anyio.to_thread.run_sync(
        build_role, changed_copy(CLUSTER_MODULE, tmp_path / "c"), "cluster", cluster_tag
    )
    m2 = await anyio.to_thread.run_sync(
        build_role, changed_copy(MACHINE_MODULE, tmp_path / "m"), "machine", machine_tag
    )
    assert (c2, m2) != (c1, m1)
    # The cluster re-applies the new digest; the machine drifts and destroys on its pin.
    again = await system.finished_job("pin", "apply", 2)
    said = f"c1 {c1}, c2 {c2}, created {again['metadata'].get('creationTimestamp')}"
    assert copied_from(again) == f"{repo}/pin-cluster@{c2}", said
    assert result_of(again)["outcome"] == "succeeded", system.log(again)
    checked = await system.finished_job("pin-m", "drift", 1)
    assert copied_from(checked) == f"{repo}/pin-machine@{m1}"
    await kube.call("DELETE", kube.captf_path("terraformmachines", "pin-m"))
    destroyed = await system.finished_job("pin-m", "destroy", 1)
    assert copied_from(destroyed) == f"{repo}/pin-machine@{m1}"
    assert result_of(destroyed)["outcome"] == "succeeded", system.log(destroyed)


def _image_volume_job(reference: str) -> Json:
    container: Json = {"name": "c", "image": "captf:dev", "args": ["runner"]}
    container["volumeMounts"] = [{"name": "m", "mountPath": "/m"}]
    volume = {"name": "m", "image": {"reference": reference}}
    pod = {"restartPolicy": "Never", "containers": [container], "volumes": [volume]}
    return {"metadata": {"name": "volume-shape"}, "spec": {"template": {"spec": pod}}}
