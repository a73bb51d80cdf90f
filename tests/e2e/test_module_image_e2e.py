"""End to end with a module image (spec.source.image): `captf image build` pushes
examples/modules/cluster with the local OpenTofu and its provider mirror to the loopback
registry; the process node pulls it as the runner pod's image volume, and the runner
applies the module from it through the generated root. No module ConfigMap is read."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio

from controller.cli.main import main
from controller.core.basics.names import STATE_KEY
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry
from tests.e2e.system import RUNNER_ACCOUNT, System, ended, in_background, result_of, running_system
from tests.kube.harness import MERGE

pytestmark = [pytest.mark.e2e, pytest.mark.kube]
Json = dict[str, Any]

CLUSTER_MODULE = Path(__file__).resolve().parents[2] / "examples" / "modules" / "cluster"


@pytest_asyncio.fixture(loop_scope="function")
async def image_system(
    tofu_build: Path,
    registry_build: Path,
    cluster: ApiServer,
    cluster_namespace: str,
    tmp_path: Path,
) -> AsyncIterator[System]:
    """The e2e system whose process node pulls image volumes with the registry build's crane."""
    started, stop = await in_background(
        running_system(cluster, cluster_namespace, tmp_path, tofu_build, registry_build / "crane")
    )
    try:
        yield started
    finally:
        await stop()


def image_volume(reference: str) -> Json:
    return {"name": "module-image", "image": {"reference": reference, "pullPolicy": "IfNotPresent"}}


def hash_of(obj: Json) -> str:
    return str(obj["metadata"]["annotations"]["captf.io/inputs-hash"])


def build_image(tag: str) -> int:
    """`captf image build` of the example cluster module: its exit status."""
    return main(["image", "build", str(CLUSTER_MODULE), "--role", "cluster", "--tag", tag])


async def test_a_module_image_is_applied_from_its_image_volume(
    image_system: System, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    system = image_system
    tag = f"{registry.host}/{system.kube.ns}/cluster:1"
    code = await anyio.to_thread.run_sync(build_image, tag)
    printed = capsys.readouterr().out.strip()
    assert code == 0
    assert printed.startswith("sha256:")

    await system.kube.setup_cluster(
        "web",
        files={},
        jobs={"serviceAccountName": RUNNER_ACCOUNT},
        variables={"endpoint_port": 7443},
        source={"image": tag, "imagePullPolicy": "IfNotPresent"},
    )
    job = await system.finished_job("web", "apply", 1)
    assert ended(job) == "Complete", system.log(job)
    assert result_of(job)["outcome"] == "succeeded", system.log(job)
    # OpenTofu and its providers came from the image, not from the runner's own build.
    ran_with = next(line for line in system.log(job).splitlines() if "module image:" in line)
    assert "/captf/runtime, CLI config " in ran_with
    assert ran_with.endswith("module-image.tofurc")
    pod = job["spec"]["template"]["spec"]
    assert image_volume(tag) in pod["volumes"]

    state = await system.kube.secret("web-state")
    document = json.loads(base64.b64decode(state["data"][STATE_KEY]))
    resources = {(r["type"], r["name"]) for r in document["resources"]}
    assert ("terraform_data", "network") in resources
    assert ("terraform_data", "load_balancer") in resources
    endpoint = document["outputs"]["control_plane_endpoint"]["value"]
    assert endpoint == {"host": "127.0.0.1", "port": 7443}
    inputs = await system.kube.secret(f"web-inputs-{hash_of(state)[:8]}")
    assert base64.b64decode(inputs["data"]["image"]).decode() == tag
    assert not [key for key in inputs["data"] if key.startswith("module.")]

    # A new reference is new inputs: the object applies again, from the new image.
    retag = f"{registry.host}/{system.kube.ns}/cluster:2"
    assert await anyio.to_thread.run_sync(build_image, retag) == 0
    patch = {"spec": {"source": {"image": retag}}}
    await system.kube.call(
        "PATCH", system.kube.captf_path("terraformclusters", "web"), patch, MERGE
    )
    second = await system.finished_job("web", "apply", 2)
    assert result_of(second)["outcome"] == "succeeded", system.log(second)
    assert hash_of(second) != hash_of(job)
    assert image_volume(retag) in second["spec"]["template"]["spec"]["volumes"]
