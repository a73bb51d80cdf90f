"""Scale from zero as the cluster-autoscaler sees it (issue 30, item 3), on Cluster API's
own controllers (`capi_cluster`), the CAPTF controller and a process node (`image_system`)
and the loopback registry: `captf image build --capacity ... --node-info ...` pushes the
example machine module with the scale-from-zero labels; a TerraformMachineTemplate names
that image, and a MachineDeployment at 0 replicas, carrying only the autoscaler's min/max
size annotations, names the template.

Checked, by reading the objects the way the cluster-autoscaler's Cluster API provider
does (`node_group` below): the MachineDeployment is a node group that can scale from
zero, its capacity being the template's `status.capacity` as Kubernetes quantities and
its system info the template's `status.nodeInfo`, with no
`capacity.cluster-autoscaler.kubernetes.io/*` annotation anywhere. A second
MachineDeployment, whose template's `spec.capacity` names cpu only, is no node group at 0:
the reader can say no.

A MachinePool's `infrastructureRef` names the TerraformMachinePool itself, not a
template: the same reader, on a MachinePool at 0 replicas whose pool runs the example
pool module pushed with the same labels, finds the pool's own `status.capacity` and
`status.nodeInfo` (the pool read them from the lookup its apply made)."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from decimal import Decimal

import anyio
import pytest

from controller.cli.main import main
from controller.dev.clusterapi import ClusterApi
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from tests.e2e.capi_objects import MODULES, CapiObjects
from tests.e2e.system import WAIT, System

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]

CLUSTER = "z1"
CAPACITY = {
    "cpu": "4",
    "memory": "16Gi",
    "ephemeral-storage": "100Gi",
    "pods": "58",
    "nvidia.com/gpu": "1",
}
NODE_INFO = {"architecture": "arm64", "operatingSystem": "linux"}

# -- the cluster-autoscaler's reading --------------------------------------------------------
#
# As kubernetes/autoscaler's cluster-autoscaler/cloudprovider/clusterapi reads a scalable
# resource (clusterapi_unstructured.go, clusterapi_utils.go, clusterapi_nodegroup.go):
#
# - min and max size from the annotations below on the MachineDeployment (missing: 0;
#   not an integer, negative, or max < min: no node group); max 0: no node group.
# - at spec.replicas 0, a node group only if it can scale from zero: its capacity has
#   both cpu and memory.
# - the capacity: `spec.template.spec.infrastructureRef` (a map of strings: `apiGroup`
#   with the group's preferred version, else `apiVersion`; `kind`, `name`), the object
#   of resource `lower(kind) + "s"` in the MachineDeployment's namespace, its
#   `status.capacity` read as a map of strings (one value not a string: none at all),
#   each value parsed as a Kubernetes quantity and dropped if it does not parse. The
#   `capacity.cluster-autoscaler.kubernetes.io/*` annotations then override it; `pods`
#   is always the maxPods annotation's, 110 without one.
# - the system info: `status.nodeInfo` as a map of strings, `architecture` and
#   `operatingSystem`.

MIN_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
MAX_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
CAPACITY_ANNOTATIONS = "capacity.cluster-autoscaler.kubernetes.io/"
DEFAULT_MAX_PODS = 110
# Resource name, annotation key (after the prefix) of the quantities annotated.
ANNOTATED = (("cpu", "cpu"), ("memory", "memory"), ("ephemeral-storage", "ephemeral-disk"))
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
} | {f"{p}i": Decimal(1024**n) for n, p in enumerate("KMGTPE", start=1)}


def quantity(text: str) -> Decimal | None:
    """A Kubernetes quantity's value (resource.ParseQuantity), or None where it fails."""
    found = _QUANTITY.match(text.strip())
    if found is None:
        return None
    suffix = found.group("suffix") or ""
    if suffix[:1] in ("e", "E"):
        return Decimal(found.group("number")) * Decimal(10) ** int(suffix[1:])
    return Decimal(found.group("number")) * _SUFFIXES[suffix]


def string_map(obj: Json, *path: str) -> dict[str, str] | None:
    """unstructured.NestedStringMap: the map at `path` if every value is a string."""
    found: object = obj
    for key in path:
        found = found.get(key) if isinstance(found, dict) else None
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        return None
    return dict(found)


@dataclass(frozen=True)
class NodeGroup:
    min_size: int
    max_size: int
    replicas: int
    capacity: dict[str, Decimal]
    system_info: dict[str, str]


async def node_group(objects: CapiObjects, scalable: Json) -> NodeGroup | None:
    """The autoscaler's node group for a scalable resource (a MachineDeployment or a
    MachinePool: read alike), or None where it makes none."""
    notes = scalable["metadata"].get("annotations") or {}
    min_size, max_size = int(notes.get(MIN_SIZE, "0")), int(notes.get(MAX_SIZE, "0"))
    if min_size < 0 or max_size < min_size or max_size == 0:
        return None
    infra = await infrastructure_object(objects, scalable)
    capacity = capacity_of(infra or {}, notes)
    replicas = int(scalable["spec"].get("replicas", 1))
    if replicas == 0 and not {"cpu", "memory"} <= set(capacity):
        return None
    info = string_map(infra or {}, "status", "nodeInfo") or {}
    system = {k: v for k, v in info.items() if k in ("architecture", "operatingSystem")}
    return NodeGroup(min_size, max_size, replicas, capacity, system)


async def infrastructure_object(objects: CapiObjects, scalable: Json) -> Json | None:
    """What `spec.template.spec.infrastructureRef` names: a MachineDeployment's template,
    a MachinePool's TerraformMachinePool."""
    ref = string_map(scalable, "spec", "template", "spec", "infrastructureRef")
    if ref is None:
        return None
    if "apiGroup" in ref:
        group = await objects.call("GET", f"/apis/{ref['apiGroup']}")
        api_version = f"{ref['apiGroup']}/{group['preferredVersion']['version']}"
    else:
        api_version = ref["apiVersion"]
    namespace = scalable["metadata"]["namespace"]
    plural = ref["kind"].lower() + "s"
    return await objects.call(
        "GET", f"/apis/{api_version}/namespaces/{namespace}/{plural}/{ref['name']}"
    )


def capacity_of(template: Json, notes: dict[str, str]) -> dict[str, Decimal]:
    shown = string_map(template, "status", "capacity") or {}
    capacity = {k: v for k, v in ((k, quantity(v)) for k, v in shown.items()) if v is not None}
    annotated: dict[str, Decimal] = {}
    for name, key in ANNOTATED:
        value = quantity(notes.get(CAPACITY_ANNOTATIONS + key, "") or "0")
        if value:
            annotated[name] = value
    gpus = notes.get(CAPACITY_ANNOTATIONS + "gpu-count")
    gpu_type = notes.get(CAPACITY_ANNOTATIONS + "gpu-type")
    if gpus and int(gpus) and gpu_type:
        annotated[gpu_type] = Decimal(int(gpus))
    pods = notes.get(CAPACITY_ANNOTATIONS + "maxPods")
    annotated["pods"] = Decimal(int(pods) if pods and int(pods) else DEFAULT_MAX_PODS)
    return capacity | annotated


# -- the test ---------------------------------------------------------------------------------


def build_machine_image(tag: str, role: str = "machine") -> str:
    """`captf image build` of the example module of `role` with the scale-from-zero
    labels: the digest it printed."""
    out = io.StringIO()
    capacity = ",".join(f"{k}={v}" for k, v in CAPACITY.items())
    node_info = ",".join(f"{k}={v}" for k, v in NODE_INFO.items())
    argv = ["image", "build", str(MODULES / role), "--role", role, "--tag", tag]
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--capacity", capacity, "--node-info", node_info])
    assert code == 0
    return out.getvalue().strip()


async def deployment_at_zero(objects: CapiObjects, name: str, bootstrap: str) -> Json:
    """A MachineDeployment of 0 replicas on template `name`, with only the autoscaler's
    min/max size annotations."""
    await objects.machine_deployment(
        name, cluster=CLUSTER, template=name, replicas=0, bootstrap=bootstrap
    )
    sizes = {MIN_SIZE: "0", MAX_SIZE: "5"}
    return await objects.patch("MachineDeployment", name, {"metadata": {"annotations": sizes}})


def deployment_of(machine_set: Json) -> str:
    owners = machine_set["metadata"].get("ownerReferences") or []
    return next((o["name"] for o in owners if o["kind"] == "MachineDeployment"), "")


def resolved(template: Json | None) -> bool:
    status = (template or {}).get("status") or {}
    conds = [c for c in status.get("conditions") or [] if c["type"] == "CapacityResolved"]
    seen = status.get("observedGeneration") == (template or {})["metadata"]["generation"]
    return seen and bool(conds) and conds[0]["reason"] == "CapacityResolved"


async def test_a_deployment_at_zero_scales_from_the_capacity_its_module_image_declares(
    capi_cluster: ClusterApi, image_system: System, registry: Registry
) -> None:
    system = image_system
    objects = CapiObjects(system.kube.server, system.kube.ns)
    tag = f"{registry.host}/{system.kube.ns}/sized-machine:1"
    await anyio.to_thread.run_sync(build_machine_image, tag)
    await objects.credentials()
    await objects.module("cluster")
    await objects.cluster(CLUSTER, module="cluster-module")
    bootstrap = await objects.bootstrap_secret(f"{CLUSTER}-bootstrap")

    # The image's labels, and a template whose spec says cpu only (it replaces the label).
    await objects.machine_template("big", cluster=CLUSTER, module="", source={"image": tag})
    await objects.machine_template("cpu-only", cluster=CLUSTER, module="", source={"image": tag})
    cpu_only = {"spec": {"capacity": {"cpu": "2"}}}
    await objects.patch("TerraformMachineTemplate", "cpu-only", cpu_only)
    await deployment_at_zero(objects, "big", bootstrap)
    await deployment_at_zero(objects, "cpu-only", bootstrap)

    template = await objects.until(
        "TerraformMachineTemplate", "big", resolved, "big: CapacityResolved", within=WAIT
    )
    assert template is not None
    assert template["status"]["capacity"] == CAPACITY
    assert template["status"]["nodeInfo"] == NODE_INFO
    assert template["status"]["capacitySource"] == {"source": "Image", "image": tag}
    template = await objects.until(
        "TerraformMachineTemplate", "cpu-only", resolved, "cpu-only: CapacityResolved"
    )
    assert template is not None
    assert template["status"]["capacity"] == {"cpu": "2"}
    assert template["status"]["capacitySource"]["source"] == "Spec"

    # Cluster API's controllers take the deployments at zero: a MachineSet of 0 each, on
    # the deployment's template, and no Machine.
    machine_sets = await objects.until_listed(
        "MachineSet",
        lambda found: sorted(map(deployment_of, found)) == ["big", "cpu-only"],
        "a MachineSet of each deployment",
        within=WAIT,
    )
    for machine_set in machine_sets:
        assert machine_set["spec"]["replicas"] == 0
        infra = machine_set["spec"]["template"]["spec"]["infrastructureRef"]
        assert infra["name"] == deployment_of(machine_set)
    assert await objects.list_of("Machine") == []
    assert await objects.list_of("TerraformMachine") == []

    # What the autoscaler reads: the deployment (no capacity annotation on it), its
    # template's status.
    big = await objects.get("MachineDeployment", "big") or {}
    await _reads_the_image_capacity(objects, big)

    # cpu without memory: the autoscaler makes no node group at zero.
    small = await objects.get("MachineDeployment", "cpu-only") or {}
    assert await node_group(objects, small) is None


async def test_a_machine_pool_at_zero_scales_from_the_capacity_its_pool_shows(
    capi_cluster: ClusterApi, image_system: System, registry: Registry
) -> None:
    system = image_system
    objects = CapiObjects(system.kube.server, system.kube.ns)
    tag = f"{registry.host}/{system.kube.ns}/sized-pool:1"
    await anyio.to_thread.run_sync(build_machine_image, tag, "machinepool")
    await objects.credentials()
    await objects.module("cluster")
    await objects.cluster(CLUSTER, module="cluster-module")
    bootstrap = await objects.bootstrap_secret(f"{CLUSTER}-bootstrap")
    await objects.machine_pool(
        "sized", cluster=CLUSTER, module="", replicas=0, bootstrap=bootstrap, source={"image": tag}
    )
    sizes = {MIN_SIZE: "0", MAX_SIZE: "5"}
    await objects.patch("MachinePool", "sized", {"metadata": {"annotations": sizes}})

    pool = await objects.until(
        "TerraformMachinePool", "sized", resolved, "sized: CapacityResolved", within=2 * WAIT
    )
    assert pool is not None
    assert pool["status"]["capacity"] == CAPACITY
    assert pool["status"]["nodeInfo"] == NODE_INFO
    assert pool["status"]["capacitySource"] == {"source": "Image", "image": tag}

    # What the autoscaler reads: the MachinePool (no capacity annotation on it), and the
    # object its infrastructureRef names: the TerraformMachinePool itself.
    machine_pool = await objects.get("MachinePool", "sized") or {}
    infra = machine_pool["spec"]["template"]["spec"]["infrastructureRef"]
    assert (infra["kind"], infra["name"]) == ("TerraformMachinePool", "sized")
    await _reads_the_image_capacity(objects, machine_pool)


async def _reads_the_image_capacity(objects: CapiObjects, scalable: Json) -> None:
    """The autoscaler reads a node group of 0 to 5 with the image's capacity from the
    scalable resource, which carries no capacity annotation of its own."""
    kind = scalable["kind"]
    notes = scalable["metadata"].get("annotations") or {}
    assert not [k for k in notes if k.startswith(CAPACITY_ANNOTATIONS)]
    group = await node_group(objects, scalable)
    assert group is not None, f"the autoscaler would make no node group of the {kind}"
    assert (group.min_size, group.max_size, group.replicas) == (0, 5, 0)
    assert group.capacity == {
        "cpu": Decimal(4),
        "memory": Decimal(16 * 1024**3),
        "ephemeral-storage": Decimal(100 * 1024**3),
        "nvidia.com/gpu": Decimal(1),
        # Shown in status.capacity, but the autoscaler's own maxPods (default 110) wins.
        "pods": Decimal(DEFAULT_MAX_PODS),
    }
    assert group.system_info == NODE_INFO
