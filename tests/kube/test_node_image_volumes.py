"""Image volumes on the process node, with the real registry and kube-controller-manager:
a Job's pod runs a table image (`python`) and mounts a module image pulled from the
registry; a pod whose image cannot be pulled waits as a kubelet's does."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from controller.dev.node import ProcessNode
from controller.dev.node.images import Image, ImageTable
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from runtime.transport import Transport, open_transport
from tests.kube.harness import eventually
from tests.registry_support import REGISTRY_USER, dockerconfigjson, layer, push

pytestmark = pytest.mark.kube


WAIT = 60.0
IMAGES = ImageTable({"python": Image("python", (sys.executable,))})
# Copies the file named by argv[1] (a container path, rewritten by the node) to argv[2].
COPY = "import pathlib, sys; pathlib.Path(sys.argv[2]).write_bytes(open(sys.argv[1], 'rb').read())"


class Node:
    def __init__(self, transport: Transport, ns: str, tmp_path: Path, crane: Path) -> None:
        self.transport = transport
        self.ns = ns
        self.log_dir = tmp_path / "logs"
        self.node = ProcessNode(
            transport,
            images=IMAGES,
            name=f"node-{ns}"[:63],
            namespace=ns,
            log_dir=self.log_dir,
            pods_dir=tmp_path / "pods",
            crane=crane,
        )

    async def create(self, plural: str, body: Json, group: str = "api/v1") -> Json:
        base = "/api/v1" if group == "api/v1" else f"/apis/{group}"
        return await self.transport.request(
            "POST", f"{base}/namespaces/{self.ns}/{plural}", body=body
        )

    async def get(self, path: str) -> Json:
        return await self.transport.request("GET", f"{path.format(ns=self.ns)}")


async def pod_status(n: Node, name: str) -> Json:
    pod = await n.get(f"/api/v1/namespaces/{{ns}}/pods/{name}")
    status: Json = pod.get("status") or {}
    return status


@pytest_asyncio.fixture(loop_scope="function")
async def n(
    registry: Registry, cluster: ApiServer, cluster_namespace: str, tmp_path: Path
) -> AsyncIterator[Node]:
    async with open_transport(str(cluster.kubeconfig)) as transport:
        yield Node(transport, cluster_namespace, tmp_path, registry.crane)


def pod_spec(image: str, out: Path, policy: str = "IfNotPresent") -> Json:
    return {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "volumes": [{"name": "module", "image": {"reference": image, "pullPolicy": policy}}],
        "containers": [
            {
                "name": "runner",
                "image": "python:3",
                "args": ["-c", COPY, "/module/main.tf", str(out)],
                "volumeMounts": [{"name": "module", "mountPath": "/module", "readOnly": True}],
            }
        ],
    }


async def test_a_jobs_pod_sees_the_files_of_its_image_volume(
    n: Node, registry: Registry, tmp_path: Path
) -> None:
    repo = f"node/{uuid.uuid4().hex[:10]}"
    push(registry, f"{repo}:v1", [layer(tmp_path / "l.tar.gz", {"main.tf": b"# module v1\n"})])
    out = tmp_path / "seen.tf"
    job = {
        "metadata": {"name": "mod"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": pod_spec(f"{registry.host}/{repo}:v1", out)},
        },
    }
    async with n.node:
        await n.create("jobs", job, group="batch/v1")

        async def complete() -> Json | None:
            found = await n.get("/apis/batch/v1/namespaces/{ns}/jobs/mod")
            return found if (found.get("status") or {}).get("succeeded") else None

        await eventually(complete, within=WAIT, what="the Job to succeed")
    assert out.read_bytes() == b"# module v1\n"
    # The API server kept the image volume: the feature is on in this Kubernetes.
    pods = await n.get("/api/v1/namespaces/{ns}/pods")
    volume = pods["items"][0]["spec"]["volumes"][0]
    assert volume["image"]["reference"] == f"{registry.host}/{repo}:v1"


async def test_an_image_that_is_not_there_backs_off_then_runs_once_pushed(
    n: Node, registry: Registry, tmp_path: Path
) -> None:
    repo = f"node/{uuid.uuid4().hex[:10]}"
    image = f"{registry.host}/{repo}:v1"
    out = tmp_path / "seen.tf"
    await n.create("pods", {"metadata": {"name": "p"}, "spec": pod_spec(image, out)})
    seen: list[str] = []

    async def waiting(reason: str) -> Json | None:
        pod = await n.get("/api/v1/namespaces/{ns}/pods/p")
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        state = (statuses[0].get("state") or {}).get("waiting") if statuses else None
        if state and (not seen or seen[-1] != state["reason"]):
            seen.append(state["reason"])
        return state if state and state["reason"] == reason else None

    async with n.node:
        pulling = await eventually(
            lambda: waiting("ErrImagePull"), within=WAIT, what="ErrImagePull"
        )
        assert image in pulling["message"]
        backing_off = await eventually(
            lambda: waiting("ImagePullBackOff"), within=WAIT, what="ImagePullBackOff"
        )
        assert backing_off["message"].startswith("Back-off pulling image")
        # No hot loop: one attempt so far, the next only after 10 s.
        assert _attempts(n, "p") == 1
        push(registry, f"{repo}:v1", [layer(tmp_path / "l.tar.gz", {"main.tf": b"# late\n"})])

        async def succeeded() -> Json | None:
            pod = await n.get("/api/v1/namespaces/{ns}/pods/p")
            return pod if (pod.get("status") or {}).get("phase") == "Succeeded" else None

        await eventually(succeeded, within=WAIT, what="the pod to succeed after the back-off")
    assert out.read_bytes() == b"# late\n"
    assert seen[:2] == ["ErrImagePull", "ImagePullBackOff"]
    assert _attempts(n, "p") == 1  # the second attempt succeeded


def _attempts(n: Node, pod: str) -> int:
    """Failed pulls the node logged for the pod."""
    log = n.log_dir / n.ns / f"{pod}.log"
    return sum("failed to pull image" in line for line in log.read_text().splitlines())


async def test_image_pull_secrets_carry_the_registrys_credentials(
    n: Node, auth_registry: Registry, tmp_path: Path
) -> None:
    docker = tmp_path / "docker"
    docker.mkdir()
    config = dockerconfigjson(auth_registry.host, *REGISTRY_USER)
    (docker / "config.json").write_text(config)
    repo = f"node/{uuid.uuid4().hex[:10]}"
    files = [layer(tmp_path / "l.tar.gz", {"main.tf": b"# private\n"})]
    push(auth_registry, f"{repo}:v1", files, docker_config=docker)
    # Another tag for the pod without credentials: once one pod pulled an image,
    # IfNotPresent reuses the cached copy whoever asks, as a kubelet does.
    push(auth_registry, f"{repo}:v2", files, docker_config=docker)
    image = f"{auth_registry.host}/{repo}:v1"
    secret = {
        "metadata": {"name": "regcred"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config},
    }
    await n.create("secrets", secret)
    out = tmp_path / "seen.tf"
    with_secret = pod_spec(image, out) | {"imagePullSecrets": [{"name": "regcred"}]}
    await n.create("pods", {"metadata": {"name": "with"}, "spec": with_secret})
    without = pod_spec(f"{auth_registry.host}/{repo}:v2", tmp_path / "x")
    await n.create("pods", {"metadata": {"name": "without"}, "spec": without})

    async with n.node:

        async def refused() -> Json | None:
            statuses = (await pod_status(n, "without")).get("containerStatuses") or []
            waiting = (statuses[0].get("state") or {}).get("waiting") if statuses else None
            return waiting if waiting and "Pull" in waiting["reason"] else None

        async def succeeded() -> Json | None:
            status = await pod_status(n, "with")
            return status if status.get("phase") == "Succeeded" else None

        await eventually(succeeded, within=WAIT, what="the pod with the pull secret to succeed")
        waiting = await eventually(refused, within=WAIT, what="the pod without it to fail its pull")
    assert out.read_bytes() == b"# private\n"
    assert "UNAUTHORIZED" in waiting["message"]
