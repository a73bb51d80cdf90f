"""End to end with a module image (spec.source.image): `captf image build` pushes
examples/modules/cluster with the local OpenTofu and its provider mirror to the loopback
registry; the process node pulls it as the runner pod's image volume, and the runner
applies the module from it through the generated root. No module ConfigMap is read."""

from __future__ import annotations

import base64
import contextlib
import io
import shutil
from pathlib import Path

import anyio
import pytest

from controller.cli.main import main
from controller.core.basics.names import CLUSTER, inputs_secret_prefix
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from tests.e2e.system import RUNNER_ACCOUNT, System, ended, result_of
from tests.kube.harness import MERGE, condition, state_of

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

CLUSTER_MODULE = Path(__file__).resolve().parents[2] / "examples" / "modules" / "cluster"


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
    # The Job ran the digest the tag named: the controller resolved it, and pinned it.
    pod = job["spec"]["template"]["spec"]
    pinned = f"{registry.host}/{system.kube.ns}/cluster@{printed}"
    assert image_volume(pinned) in pod["volumes"]

    state = await system.kube.secret(state_of(system.kube, "web"))
    document = await system.kube.state_document(state_of(system.kube, "web"))
    resources = {(r["type"], r["name"]) for r in document["resources"]}
    assert ("terraform_data", "network") in resources
    assert ("terraform_data", "load_balancer") in resources
    endpoint = document["outputs"]["control_plane_endpoint"]["value"]
    assert endpoint == {"host": "127.0.0.1", "port": 7443}
    inputs = await system.kube.secret(
        f"{inputs_secret_prefix(system.kube.ns, CLUSTER, 'web')}{hash_of(state)[:8]}"
    )
    assert base64.b64decode(inputs["data"]["image"]).decode() == tag
    assert base64.b64decode(inputs["data"]["image.digest"]).decode() == printed
    assert not [key for key in inputs["data"] if key.startswith("module.")]

    # A new reference is new inputs: the object applies again, from the new image.
    retag = f"{registry.host}/{system.kube.ns}/cluster:2"
    assert await anyio.to_thread.run_sync(build_image, retag) == 0
    reprinted = capsys.readouterr().out.strip()
    patch = {"spec": {"source": {"image": retag}}}
    await system.kube.call(
        "PATCH", system.kube.captf_path("terraformclusters", "web"), patch, MERGE
    )
    second = await system.finished_job("web", "apply", 2)
    assert result_of(second)["outcome"] == "succeeded", system.log(second)
    assert hash_of(second) != hash_of(job)
    pinned_again = f"{registry.host}/{system.kube.ns}/cluster@{reprinted}"
    assert image_volume(pinned_again) in second["spec"]["template"]["spec"]["volumes"]
    assert second["metadata"]["annotations"]["captf.io/module-image"] == retag


MACHINE_MODULE = CLUSTER_MODULE.parent / "machine"


def build_role(directory: Path, role: str, tag: str) -> str:
    """`captf image build` of `directory` as a `role` module: the digest it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["image", "build", str(directory), "--role", role, "--tag", tag])
    assert code == 0
    return out.getvalue().strip()


def changed_copy(directory: Path, into: Path) -> Path:
    """The module with one more file: pushed under the same tag, a new digest."""
    shutil.copytree(directory, into)
    (into / "moved.tf").write_text("# the second version of this module\n")
    return into


def volume_reference(job: Json) -> str:
    volumes = job["spec"]["template"]["spec"]["volumes"]
    return str(next(v for v in volumes if "image" in v)["image"]["reference"])


def ran(system: System, name: str, op: str) -> list[Json]:
    """Every Job of the object and op the watch delivered, latest versions."""
    return [
        j
        for j in system.jobs.latest()
        if (j["metadata"].get("labels") or {}).get("captf.io/name") == name
        and (j["metadata"].get("labels") or {}).get("captf.io/op") == op
    ]


async def test_a_moved_tag_re_applies_the_cluster_while_the_machine_keeps_its_pin(
    image_system: System, registry: Registry, tmp_path: Path
) -> None:
    system, kube = image_system, image_system.kube
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
    assert volume_reference(first) == f"{repo}/pin-cluster@{c1}"
    inputs = await kube.secret(
        f"{inputs_secret_prefix(kube.ns, CLUSTER, 'pin')}{hash_of(first)[:8]}"
    )
    assert base64.b64decode(inputs["data"]["image.digest"]).decode() == c1

    machine = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformMachine",
        "metadata": {"name": "pin-m"},
        "spec": {
            "source": {"image": machine_tag},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"} | jobs,
            "drift": drift,
            "health": {"interval": "0"},  # the health watch's refreshes are not this test's
            "guard": {"allowDestructive": True},
        },
    }
    await kube.create_member(machine, cluster="pin")
    applied = await system.finished_job("pin-m", "apply", 1)
    assert result_of(applied)["outcome"] == "succeeded", system.log(applied)
    assert volume_reference(applied) == f"{repo}/pin-machine@{m1}"

    async def shows_image() -> Json | None:
        status = (await kube.get("terraformmachines", "pin-m")).get("status") or {}
        return status.get("image")

    shown = await system.until(shows_image, "status.image of pin-m")
    # --module-image-mount=auto on this v1.35 API server: the image volume.
    assert shown == {"reference": machine_tag, "digest": m1, "mount": "volume"}

    # Both tags move to new content.
    c2 = await anyio.to_thread.run_sync(
        build_role, changed_copy(CLUSTER_MODULE, tmp_path / "c"), "cluster", cluster_tag
    )
    m2 = await anyio.to_thread.run_sync(
        build_role, changed_copy(MACHINE_MODULE, tmp_path / "m"), "machine", machine_tag
    )
    assert (c2, m2) != (c1, m1)

    # The cluster's next drift check resolves the tag again and re-applies the new digest.
    again = await system.finished_job("pin", "apply", 2)
    assert volume_reference(again) == f"{repo}/pin-cluster@{c2}"
    assert result_of(again)["outcome"] == "succeeded", system.log(again)
    reasons = {
        (v.get("status") or {}).get("next", {}).get("reason") for v in system.clusters.of("pin")
    }
    assert "ImageTagMoved" in reasons

    # The machine's drift check runs its pinned digest, and nothing re-applies it.
    checked = await system.finished_job("pin-m", "drift", 1)
    assert volume_reference(checked) == f"{repo}/pin-machine@{m1}"
    await kube.call("DELETE", kube.captf_path("terraformmachines", "pin-m"))
    destroyed = await system.finished_job("pin-m", "destroy", 1)
    assert volume_reference(destroyed) == f"{repo}/pin-machine@{m1}"
    assert result_of(destroyed)["outcome"] == "succeeded", system.log(destroyed)
    assert [volume_reference(j) for j in ran(system, "pin-m", "apply")] == [
        f"{repo}/pin-machine@{m1}"
    ]


async def test_a_missing_image_and_a_registry_wanting_credentials_start_no_job(
    image_system: System, registry: Registry, auth_registry: Registry
) -> None:
    system, kube = image_system, image_system.kube
    jobs = {"serviceAccountName": RUNNER_ACCOUNT}
    missing = f"{registry.host}/{kube.ns}/never-pushed:1"
    locked = f"{auth_registry.host}/{kube.ns}/cluster:1"
    await kube.setup_cluster("gone", files={}, jobs=jobs, variables={}, source={"image": missing})
    await kube.setup_cluster("locked", files={}, jobs=jobs, variables={}, source={"image": locked})

    async def reason_of(name: str) -> str | None:
        found = condition(await kube.get("terraformclusters", name), "ImageResolved")
        return found["reason"] if found and found["status"] == "False" else None

    assert await system.until(lambda: reason_of("gone"), "gone: ImageNotFound") == "ImageNotFound"
    assert (
        await system.until(lambda: reason_of("locked"), "locked: RegistryUnauthorized")
        == "RegistryUnauthorized"
    )
    gone = await kube.get("terraformclusters", "gone")
    assert gone["status"]["next"]["reason"] == "ImageNotFound"
    assert await kube.jobs() == []
