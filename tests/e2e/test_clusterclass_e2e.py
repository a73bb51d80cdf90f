"""The ClusterClass flavour as a platform team uses it: `clusterctl generate cluster
--flavor clusterclass` with only the documented variables (the module images and the
identity), applied to a server where Cluster API's manager runs the topology controller
(`capi_cluster`), the CAPTF controller and a process node that pulls module images
(`image_system`).

Cluster API's kubeadm controllers are not run: the test plays them, writing what they
would (the KubeadmControlPlane's status once "initialized", each KubeadmConfig's bootstrap
data Secret), and a stand-in kubelet registers a Ready Node for each providerID
(controller/dev/workload.py's NodeJoiner). Everything else is the real topology,
MachineDeployment, MachineSet and Machine controllers, and CAPTF.

Checked: the Cluster is provisioned from the cluster module image the variable named,
its machines run the machine module image (their Jobs mount its digest), and a change of
the `machineModuleImage` variable rolls the MachineDeployment onto machines of the new
image, the old ones destroyed."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import yaml

from controller.cli.main import main
from controller.dev import clusterctl
from controller.dev.clusterapi import ClusterApi
from controller.dev.workload import NodeJoiner
from runtime.envtest import RequestFailed
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from tests.e2e.capi_objects import (
    CREDENTIALS,
    MODULES,
    RUNNER_IMAGE,
    CapiObjects,
    infrastructure_provisioned,
    phase_of,
)
from tests.e2e.system import WAIT, System
from tests.e2e.test_clusterapi_e2e import jobs_of
from tests.kube.test_clusterctl import create_all, documents, kubeadm_crds, run_clusterctl

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]

CLUSTER = "cc1"
WORKERS = 2
KUBERNETES = "v1.35.0"
BOOTSTRAP = "/apis/bootstrap.cluster.x-k8s.io/v1beta2"
CONTROL_PLANE = "/apis/controlplane.cluster.x-k8s.io/v1beta2"
CLASS = "/apis/cluster.x-k8s.io/v1beta2"
PLAY_SECONDS = 0.5


def second_machine_module(directory: Path) -> Path:
    """The example machine module with one file more: another image, another digest."""
    shutil.copytree(MODULES / "machine", directory)
    (directory / "v2.tf").write_text("# the second version of the machine module\n")
    return directory


async def push_images(registry: Registry, namespace: str, tmp_path: Path) -> dict[str, str]:
    """cluster, machine, machinepool and machine-v2 references in the loopback registry."""
    base = f"{registry.host}/{namespace}"
    wanted = {
        "cluster": (MODULES / "cluster", "cluster", f"{base}/cluster:1"),
        "machine": (MODULES / "machine", "machine", f"{base}/machine:1"),
        "machinepool": (MODULES / "machinepool", "machinepool", f"{base}/machinepool:1"),
        "machine-v2": (
            second_machine_module(tmp_path / "machine-v2"),
            "machine",
            f"{base}/machine:2",
        ),
    }
    out = {}
    for key, (module, role, tag) in wanted.items():
        code = await anyio.to_thread.run_sync(
            main, ["image", "build", str(module), "--role", role, "--tag", tag]
        )
        assert code == 0, f"captf image build {module}"
        out[key] = tag
    return out


def generate(capi_build: Path, workdir: Path, namespace: str, images: dict[str, str]) -> list[Json]:
    """`clusterctl generate cluster --flavor clusterclass` with the documented variables."""
    provider = {
        "name": clusterctl.NAME,
        "url": f"file://{clusterctl.ROOT / clusterctl.REPOSITORY / clusterctl.COMPONENTS}",
        "type": "InfrastructureProvider",
    }
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "clusterctl.yaml").write_text(yaml.safe_dump({"providers": [provider]}))
    (workdir / "home").mkdir(exist_ok=True)
    env = {
        "TERRAFORM_CLUSTER_MODULE_IMAGE": images["cluster"],
        "TERRAFORM_MACHINE_MODULE_IMAGE": images["machine"],
        "TERRAFORM_POOL_MODULE_IMAGE": images["machinepool"],
        "TERRAFORM_IDENTITY_KIND": "Secret",
        "TERRAFORM_IDENTITY": CREDENTIALS,
        "TERRAFORM_RUNNER_IMAGE": RUNNER_IMAGE,
    }
    out = run_clusterctl(
        capi_build, workdir, "generate", "cluster", CLUSTER, "--flavor", "clusterclass",
        "--infrastructure", f"{clusterctl.NAME}:{clusterctl.VERSION}",
        "--kubernetes-version", KUBERNETES, "--control-plane-machine-count", "1",
        "--worker-machine-count", str(WORKERS), "--target-namespace", namespace, env=env,
    )  # fmt: skip
    return documents(out)


async def play_kubeadm(objects: CapiObjects) -> None:
    """What the kubeadm control-plane and bootstrap controllers would write, forever: the
    control plane initialized at the topology's version, and bootstrap data for every
    KubeadmConfig."""
    while True:
        # As a controller would, it retries what the API server refuses for now (a CRD
        # just installed answers 429 while its storage initializes).
        with contextlib.suppress(RequestFailed):
            await _initialize_control_plane(objects)
            path = f"{BOOTSTRAP}/namespaces/{objects.ns}/kubeadmconfigs"
            for config in (await objects.call("GET", path))["items"]:
                if not (config.get("status") or {}).get("dataSecretName"):
                    await _bootstrap(objects, config["metadata"]["name"])
        await asyncio.sleep(PLAY_SECONDS)


async def _initialize_control_plane(objects: CapiObjects) -> None:
    found = await objects.call(
        "GET", f"{CONTROL_PLANE}/namespaces/{objects.ns}/kubeadmcontrolplanes"
    )
    for plane in found["items"]:
        if (plane.get("status") or {}).get("version") == plane["spec"]["version"]:
            continue
        replicas = plane["spec"].get("replicas", 1)
        status = {
            "version": plane["spec"]["version"],
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "upToDateReplicas": replicas,
            "initialization": {"controlPlaneInitialized": True},
        }
        path = f"{CONTROL_PLANE}/namespaces/{objects.ns}/kubeadmcontrolplanes"
        await objects.call(
            "PATCH",
            f"{path}/{plane['metadata']['name']}/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )


async def _bootstrap(objects: CapiObjects, name: str) -> None:
    secret = f"{name}-bootstrap"
    with contextlib.suppress(AssertionError):  # already there: a pass before wrote it
        await objects.bootstrap_secret(secret)
    status = {"dataSecretName": secret, "initialization": {"dataSecretCreated": True}}
    await objects.call(
        "PATCH",
        f"{BOOTSTRAP}/namespaces/{objects.ns}/kubeadmconfigs/{name}/status",
        {"status": status},
        content_type="application/merge-patch+json",
    )


@contextlib.asynccontextmanager
async def kubeadm_and_kubelets(system: System, objects: CapiObjects) -> AsyncIterator[None]:
    joiner = NodeJoiner(system.transport, say=lambda who, what: None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(play_kubeadm, objects)
        tg.start_soon(joiner.run)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


async def machines_running(objects: CapiObjects, image: str) -> list[Json]:
    """WORKERS Machines of the Cluster, none deleting, each with a providerID and a
    provisioned TerraformMachine that runs `image`."""

    async def probe() -> list[Json] | None:
        machines = await objects.list_of("Machine", cluster=CLUSTER)
        if len(machines) != WORKERS or any(phase_of(m) == "Deleting" for m in machines):
            return None
        for machine in machines:
            infra = await objects.get("TerraformMachine", machine["metadata"]["name"])
            status = (infra or {}).get("status") or {}
            if (infra or {}).get("spec", {}).get("source", {}).get("image") != image:
                return None
            if not (status.get("initialization") or {}).get("provisioned"):
                return None
        return machines

    deadline = asyncio.get_running_loop().time() + 6 * WAIT
    while (found := await probe()) is None:
        if asyncio.get_running_loop().time() > deadline:
            names = [
                m["metadata"]["name"] for m in await objects.list_of("Machine", cluster=CLUSTER)
            ]
            raise AssertionError(
                f"{WORKERS} machines of {image} not provisioned; machines: {names}"
            )
        await asyncio.sleep(0.5)
    return found


def pinned_volume(job: Json) -> str:
    [volume] = [v for v in job["spec"]["template"]["spec"]["volumes"] if "image" in v]
    return str(volume["image"]["reference"])


async def test_a_clusterclass_cluster_runs_the_images_its_variables_name(
    capi_cluster: ClusterApi,
    capi_build: Path,
    image_system: System,
    registry: Registry,
    tmp_path: Path,
) -> None:
    system = image_system
    server, namespace = system.kube.server, system.kube.ns
    await asyncio.to_thread(server.install_crds, kubeadm_crds(_mkdir(tmp_path / "kubeadm")))
    images = await push_images(registry, namespace, tmp_path)
    objects = CapiObjects(server, namespace)
    await objects.credentials()
    await objects.kubeconfig_secret(CLUSTER)

    generated = generate(capi_build, tmp_path / "clusterctl", namespace, images)
    [cluster] = [o for o in generated if o["kind"] == "Cluster"]
    await create_all(server, [o for o in generated if o["kind"] != "Cluster"], namespace)
    await objects.until(
        "ClusterClass", "terraform", _reconciled, "the ClusterClass reconciled", within=WAIT
    )
    await create_all(server, [cluster], namespace)

    async with kubeadm_and_kubelets(system, objects):
        provisioned = await objects.until(
            "Cluster", CLUSTER, infrastructure_provisioned, "provisioned", within=3 * WAIT
        )
        assert provisioned is not None
        infra_name = provisioned["spec"]["infrastructureRef"]["name"]
        infra = await objects.get("TerraformCluster", infra_name)
        assert infra is not None
        assert infra["spec"]["source"] == {
            "image": images["cluster"],
            "imagePullPolicy": "IfNotPresent",
        }
        assert infra["spec"]["identityRef"] == {"kind": "Secret", "name": CREDENTIALS}
        [apply] = jobs_of(system, infra_name, "apply")[:1]
        assert pinned_volume(apply).startswith(f"{images['cluster'].rsplit(':', 1)[0]}@sha256:")

        first = await machines_running(objects, images["machine"])
        for machine in first:
            name = machine["metadata"]["name"]
            [job] = jobs_of(system, name, "apply")
            assert pinned_volume(job).startswith(f"{images['machine'].rsplit(':', 1)[0]}@sha256:")
        await what_a_platform_team_watches(system, infra_name, first)
        digest_v1 = {
            pinned_volume(jobs_of(system, m["metadata"]["name"], "apply")[0]) for m in first
        }

        # The variable changes: new templates, a rollout onto machines of the new image.
        variables = [
            v | {"value": images["machine-v2"]} if v["name"] == "machineModuleImage" else v
            for v in provisioned["spec"]["topology"]["variables"]
        ]
        await objects.patch("Cluster", CLUSTER, {"spec": {"topology": {"variables": variables}}})
        second = await machines_running(objects, images["machine-v2"])

    old = {m["metadata"]["name"] for m in first}
    new = {m["metadata"]["name"] for m in second}
    assert not old & new, "the rollout replaced every machine"
    digest_v2 = {pinned_volume(jobs_of(system, name, "apply")[0]) for name in new}
    assert len(digest_v2) == 1
    assert digest_v2 != digest_v1
    for name in old:
        [destroy] = jobs_of(system, name, "destroy")
        assert (destroy.get("status") or {}).get("succeeded") == 1, name
        assert await objects.get("TerraformMachine", name) is None


async def what_a_platform_team_watches(system: System, cluster: str, machines: list[Json]) -> None:
    """The conditions, the transition Events and the per-object gauges of what ran."""
    infra = await system.kube.call("GET", system.kube.captf_path("terraformclusters", cluster))
    found = {c["type"]: c for c in infra["status"]["conditions"]}
    assert found["InputsApplied"]["status"] == "True"
    assert found["StateReadable"]["status"] == "True"
    assert found["EndpointAvailable"]["status"] == "True"
    names = {m["metadata"]["name"] for m in machines}

    async def told() -> set[tuple[str, str]] | None:
        events = await system.kube.events()
        seen = {(e["involvedObject"]["name"], e["reason"]) for e in events}
        wanted = {(n, r) for n in names for r in ("ProviderIDSet", "DigestPinned")}
        wanted |= {(cluster, "EndpointSet"), (cluster, "DigestPinned")}
        return wanted if wanted <= seen else None

    await system.until(told, "the transition Events")
    for name in names:
        labels = {"namespace": system.kube.ns, "kind": "TerraformMachine", "name": name}
        assert system.registry.get_sample_value("captf_object_ready", labels) == 1.0
        state = system.registry.get_sample_value("captf_object_state_bytes", labels)
        assert state is not None
        assert state > 0
        success = "captf_object_last_success_timestamp_seconds"
        assert system.registry.get_sample_value(success, labels) is not None


def _reconciled(cls: Json | None) -> bool:
    meta = (cls or {}).get("metadata") or {}
    return bool(cls) and (cls or {}).get("status", {}).get("observedGeneration") == meta.get(
        "generation"
    )


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
