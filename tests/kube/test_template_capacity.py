"""Scale from zero on the real API server, with the controller running and a real registry:
a TerraformMachineTemplate (and a pool template) whose module image carries
`io.captf.capacity` and `io.captf.node-info` shows them as `status.capacity` and
`status.nodeInfo`, as Cluster API's autoscaler reads them, with CapacityResolved and its
Event; `spec.capacity` (mutable) replaces the label; an image the registry does not have
reads ImageInspectFailed and shows no capacity."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from tests.kube.harness import Kube, condition, events_of, eventually, running_controller
from tests.registry_support import crane, layer, push

pytestmark = pytest.mark.kube
OBJECTS = "/apis/infrastructure.cluster.x-k8s.io/v1beta1"
MERGE = "application/merge-patch+json"
PLURALS = {
    "TerraformMachineTemplate": "terraformmachinetemplates",
    "TerraformMachinePoolTemplate": "terraformmachinepooltemplates",
}


def labelled_image(registry: Registry, tmp_path: Path, labels: dict[str, str]) -> str:
    """A one-layer image pushed with `labels`; its reference (by tag)."""
    reference = f"capacity/{uuid.uuid4().hex[:10]}:1"
    push(registry, reference, [layer(tmp_path / "l.tar.gz", {"captf/module/main.tf": b"#\n"})])
    target = f"{registry.host}/{reference}"
    flags = [arg for k, v in labels.items() for arg in ("-l", f"{k}={v}")]
    if flags:
        crane(registry, "mutate", target, *flags, "-t", target)
    return target


def template(kind: str, name: str, image: str, **spec: Any) -> Json:
    inner = {"source": {"image": image}, "jobs": {"image": "runner:1"}}
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"template": {"spec": inner}, **spec},
    }


def path(kind: str, namespace: str, name: str = "") -> str:
    out = f"{OBJECTS}/namespaces/{namespace}/{PLURALS[kind]}"
    return f"{out}/{name}" if name else out


async def resolved(server: ApiServer, kind: str, namespace: str, name: str, reason: str) -> Json:
    async def probe() -> Json | None:
        obj = server.request("GET", path(kind, namespace, name))
        cond = condition(obj, "CapacityResolved")
        gen = obj["metadata"]["generation"]
        seen = (obj.get("status") or {}).get("observedGeneration")
        return obj if cond and cond.get("reason") == reason and seen == gen else None

    return await eventually(probe, what=f"{kind} {name} CapacityResolved {reason}")


@pytest.mark.parametrize("kind", list(PLURALS))
async def test_a_template_shows_the_capacity_its_module_image_declares(
    apiserver: ApiServer, namespace: str, registry: Registry, tmp_path: Path, kind: str
) -> None:
    capacity = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
    node_info = {"architecture": "arm64", "operatingSystem": "linux"}
    labels = {
        "io.captf.capacity": json.dumps(capacity),
        "io.captf.node-info": json.dumps(node_info),
    }
    image = labelled_image(registry, tmp_path, labels)
    kube = Kube(apiserver, namespace)
    async with running_controller(apiserver, namespace, clock=SteppedClock()):
        apiserver.request("POST", path(kind, namespace), template(kind, "t1", image))
        obj = await resolved(apiserver, kind, namespace, "t1", "CapacityResolved")
        status = obj["status"]
        assert status["capacity"] == capacity
        assert status["nodeInfo"] == node_info
        assert status["capacitySource"] == {"source": "Image", "image": image}
        assert [e["involvedObject"]["name"] for e in await events_of(kube, "CapacityResolved")] == [
            "t1"
        ]
        # spec.capacity is mutable and replaces the label whole; nodeInfo stays the image's.
        patch = {"spec": {"capacity": {"cpu": "8", "memory": "32Gi"}}}
        apiserver.request("PATCH", path(kind, namespace, "t1"), patch, MERGE)
        obj = await resolved(apiserver, kind, namespace, "t1", "CapacityResolved")
        assert obj["status"]["capacity"] == {"cpu": "8", "memory": "32Gi"}
        assert obj["status"]["capacitySource"]["source"] == "Spec"
        assert obj["status"]["nodeInfo"] == node_info


async def test_an_image_without_labels_is_not_declared_and_a_missing_one_fails_inspection(
    apiserver: ApiServer, namespace: str, registry: Registry, tmp_path: Path
) -> None:
    kind = "TerraformMachineTemplate"
    plain = labelled_image(registry, tmp_path, {})
    missing = f"{registry.host}/capacity/none-{uuid.uuid4().hex[:8]}:1"
    kube = Kube(apiserver, namespace)
    async with running_controller(apiserver, namespace, clock=SteppedClock()):
        apiserver.request("POST", path(kind, namespace), template(kind, "plain", plain))
        apiserver.request("POST", path(kind, namespace), template(kind, "gone", missing))
        obj = await resolved(apiserver, kind, namespace, "plain", "CapacityNotDeclared")
        assert "capacity" not in obj["status"]
        assert "nodeInfo" not in obj["status"]
        obj = await resolved(apiserver, kind, namespace, "gone", "ImageInspectFailed")
        assert condition(obj, "CapacityResolved")["status"] == "False"  # type: ignore[index]
        assert "capacity" not in obj["status"]
        warned = await events_of(kube, "ImageInspectFailed")
        assert [e["involvedObject"]["name"] for e in warned] == ["gone"]


async def test_a_malformed_label_reads_capacity_label_invalid(
    apiserver: ApiServer, namespace: str, registry: Registry, tmp_path: Path
) -> None:
    kind = "TerraformMachineTemplate"
    labels = {
        "io.captf.capacity": json.dumps({"cpu": "four"}),
        "io.captf.node-info": json.dumps({"architecture": "amd64"}),
    }
    image = labelled_image(registry, tmp_path, labels)
    async with running_controller(apiserver, namespace, clock=SteppedClock()):
        apiserver.request("POST", path(kind, namespace), template(kind, "bad", image))
        obj = await resolved(apiserver, kind, namespace, "bad", "CapacityLabelInvalid")
        assert "capacity" not in obj["status"]
        assert obj["status"]["nodeInfo"] == {"architecture": "amd64"}
