"""`captf run` manages the examples: examples/objects/*.yaml applied as kubectl would
(server-side apply), then the controller takes every object to Ready in dependency order.

Each object first gets a Job or a documented wait reason; playing each apply's
success lets the next object in the chain (cluster, pool, machine) start."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from controller.io.main import reconcile_errors
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    MERGE,
    Kube,
    condition_is,
    eventually,
    next_is,
    nth_job,
    owner_reference,
    running_controller,
    succeed_apply,
)

pytestmark = pytest.mark.kube
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "objects"
APPLY_PATCH = "application/apply-patch+yaml"
_OBJECTS = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{ns}"
PATHS = {
    "Secret": "/api/v1/namespaces/{ns}/secrets",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "TerraformCluster": f"{_OBJECTS}/terraformclusters",
    "TerraformMachinePool": f"{_OBJECTS}/terraformmachinepools",
    "TerraformMachine": f"{_OBJECTS}/terraformmachines",
    "Cluster": "/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/clusters",
    "MachinePool": "/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/machinepools",
    "Machine": "/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/machines",
}
# Who owns each CAPTF kind, as Cluster API's controllers set it.
OWNERS = {
    "TerraformCluster": "Cluster",
    "TerraformMachinePool": "MachinePool",
    "TerraformMachine": "Machine",
}


def load_docs(directory: Path) -> list[Json]:
    return [
        doc
        for path in sorted(directory.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


async def kubectl_apply(kube: Kube, docs: list[Json]) -> None:
    """`kubectl apply --server-side -n namespace`: every document, in order."""
    for doc in docs:
        doc["metadata"]["namespace"] = kube.ns
        path = PATHS[doc["kind"]].format(ns=kube.ns) + f"/{doc['metadata']['name']}"
        await kube.call("PATCH", f"{path}?fieldManager=kubectl", doc, APPLY_PATCH)


PLURALS = {
    "TerraformCluster": "terraformclusters",
    "TerraformMachinePool": "terraformmachinepools",
    "TerraformMachine": "terraformmachines",
}
# What a member documents waiting for before its cluster and dependencies are Ready.
# A pool also waits for its cluster's outputs Secret (DurableInputsMissing).
MEMBER_WAITS = {"OwnerNotReady", "DependenciesNotReady", "DurableInputsMissing"}


async def _first_job_or_wait(kube: Kube, kind: str, name: str) -> Json | str:
    """The object's first Job, or the reason it documents for waiting (status.next)."""

    async def probe() -> Json | str | None:
        jobs = await kube.jobs(f"captf.io/name={name}")
        if jobs:
            return jobs[0]
        nxt = ((await kube.get(PLURALS[kind], name)).get("status") or {}).get("next") or {}
        return nxt.get("reason") if nxt.get("reason") in MEMBER_WAITS else None

    return await eventually(probe, what=f"{kind}/{name}: a Job or a documented wait")


async def play_cluster_api(kube: Kube, docs: list[Json]) -> None:
    """What Cluster API's controllers would do for the examples: each CAPTF object owned by
    the Cluster API object of its name, and the Cluster's infrastructure provisioned."""
    for doc in docs:
        owner_kind = OWNERS.get(doc["kind"])
        if owner_kind is None:
            continue
        name = doc["metadata"]["name"]
        owner = await kube.call("GET", PATHS[owner_kind].format(ns=kube.ns) + f"/{name}")
        patch = {"metadata": {"ownerReferences": [owner_reference(owner)]}}
        await kube.call("PATCH", kube.captf_path(PLURALS[doc["kind"]], name), patch, MERGE)
    for doc in docs:
        if doc["kind"] == "Cluster":
            status = {"status": {"initialization": {"infrastructureProvisioned": True}}}
            path = PATHS["Cluster"].format(ns=kube.ns) + f"/{doc['metadata']['name']}/status"
            await kube.call("PATCH", path, status, MERGE)


async def _write_outputs(kube: Kube, obj: Json) -> None:
    """Plays the runner's outputs Secret of an object with spec.outputs."""
    outputs = (obj.get("spec") or {}).get("outputs")
    if not outputs:
        return
    data = {name: f"{obj['metadata']['name']}-{name}" for name in outputs.get("names") or []}
    body = {"metadata": {"name": outputs["secretName"]}, "stringData": data}
    await kube.call("POST", f"/api/v1/namespaces/{kube.ns}/secrets", body)


async def test_the_examples_are_managed(apiserver: ApiServer, namespace: str) -> None:
    kube = Kube(apiserver, namespace)
    clock = SteppedClock()
    docs = load_docs(EXAMPLES)
    await kubectl_apply(kube, docs)
    await play_cluster_api(kube, docs)
    # Clusters first, then pools, then machines: the order readiness flows in.
    objects = [(kind, d["metadata"]["name"]) for kind in PLURALS for d in docs if d["kind"] == kind]
    assert {kind for kind, _ in objects} == set(PLURALS)
    registry = CollectorRegistry()
    async with running_controller(apiserver, namespace, clock=clock, registry=registry):
        first = {obj: await _first_job_or_wait(kube, *obj) for obj in objects}
        for (kind, name), seen in first.items():
            # Clusters depend on nothing here: each starts at once.
            assert kind != "TerraformCluster" or isinstance(seen, dict), (name, seen)
        # Play each apply's success in readiness order; each unblocks the next.
        for kind, name in objects:
            job = await nth_job(kube, 1, f"captf.io/name={name}")
            assert job["metadata"]["labels"]["captf.io/op"] == "apply"
            # By kind too: the Cluster API Cluster of a TerraformCluster has its name.
            doc = next(d for d in docs if (d["kind"], d["metadata"]["name"]) == (kind, name))
            await _write_outputs(kube, doc)
            await succeed_apply(kube, job, serial=1, at=clock.now(), name=name)
            await condition_is(kube, "Ready", "True", name=name, plural=PLURALS[kind])
        for kind, name in objects:
            await next_is(kube, "Idle", name=name, plural=PLURALS[kind])
            assert len(await kube.jobs(f"captf.io/name={name}")) == 1
        # Conflicts on the controller's own writes are retries, not errors; no write
        # fights the cache.
        assert reconcile_errors(registry) == 0
