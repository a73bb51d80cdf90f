"""A MachinePool whose cloud group grows on its own, under Cluster API's real controllers
(issue 30, "Done when"; issue 37): the cloud sizes the group (the MachinePool carries the
user's `cluster.x-k8s.io/replicas-managed-by` and the autoscaler's min/max annotations,
so the module gets `autoscaling.enabled`) and the module reads the size from the group's
API on every refresh; the group goes from 2 to 4 outside Cluster API. The membership
re-read (a refresh Job every `spec.membership.interval`) finds the 4, the pool writes them
back, and Cluster API, which copies the pool's
providerIDList, matches 4 Nodes (the stand-in kubelets of controller/dev/workload.py
register one per providerID), while the write-back makes `MachinePool.spec.replicas` 4.

The group's API is a file the test writes, read by the module's `local_file` data source
(tests/e2e/modules/self_scaling_pool, a module to the public contract). No wait is
timed: "within two membership intervals" is counted in refresh Jobs, from the pool's
versions as the watch delivered them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from controller.core.basics.names import ANN_SEQ, GROUP, VERSION
from controller.dev.clusterapi import ClusterApi
from controller.dev.workload import NodeJoiner, module_configmap, node_name
from runtime.cache import Informer, Resource, Selection
from runtime.clock import LoopClock
from runtime.jsonobj import Json
from tests.e2e.capi_objects import CAPI, INFRA, CapiObjects, ref
from tests.e2e.system import WAIT, Seen, System
from tests.e2e.test_clusterapi_e2e import CLUSTER, jobs_of, provisioned_cluster
from tests.kube.harness import events_of

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]

POOL = "c1-grows"
MODULES = Path(__file__).resolve().parent / "modules"
POOLS = Resource(GROUP, VERSION, "terraformmachinepools")
BOUNDS = {
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
}
MANAGED = "cluster.x-k8s.io/replicas-managed-by"
# The user's: the cloud sizes the group. Any value but "false" says so.
CLOUD = {MANAGED: "cloud"}
# Two controller minutes: two real seconds at the e2e time scale, a refresh Job's length
# or so on a loaded machine, so re-reads follow each other without crowding the node.
INTERVAL = "2m"


async def pool_with(
    objects: CapiObjects, name: str, annotations: dict[str, str], group: Path | None = None
) -> None:
    """The TerraformMachinePool `name` running the self-scaling module, re-read every
    INTERVAL, and its MachinePool of 2 carrying `annotations`. With `group`, the module
    reads the group's size there; without, the group holds the replicas it is given."""
    await objects.create(module_configmap("self_scaling_pool", f"{name}-module", modules=MODULES))
    variables = {"group_file": str(group)} if group is not None else {}
    spec = objects.infra_spec(
        f"{name}-module", variables=variables, membership={"interval": INTERVAL}
    )
    pool = {"apiVersion": INFRA, "kind": "TerraformMachinePool", "metadata": {"name": name}}
    await objects.create(pool | {"spec": spec})
    bootstrap = await objects.bootstrap_secret(f"{name}-bootstrap")
    machine = {
        "clusterName": CLUSTER,
        "version": "v1.35.0",
        "bootstrap": {"dataSecretName": bootstrap},
        "infrastructureRef": ref("TerraformMachinePool", name),
    }
    await objects.create(
        {
            "apiVersion": CAPI,
            "kind": "MachinePool",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"clusterName": CLUSTER, "replicas": 2, "template": {"spec": machine}},
        }
    )


@asynccontextmanager
async def watched(system: System, resource: Resource = POOLS) -> AsyncIterator[Seen]:
    """Every version of the namespace's objects of `resource` (TerraformMachinePools
    unless told) the watch delivers."""
    seen = Seen()
    selection = Selection(namespace=system.kube.ns)
    informer = Informer(system.transport, resource, clock=LoopClock(), selection=selection)
    informer.add_handler(seen.record)
    async with informer:
        await informer.wait_synced()
        yield seen


def sized(pool: Json | None, replicas: int, managed_by: str | None = "cloud") -> bool:
    """The MachinePool as Cluster API and CAPTF leave it at `replicas`: spec.replicas,
    the providerIDs copied and a Ready Node matched each, and its replicas-managed-by
    `managed_by` (the user's; CAPTF never sets it)."""
    pool = pool or {}
    spec, status = pool.get("spec") or {}, pool.get("status") or {}
    notes = pool.get("metadata", {}).get("annotations") or {}
    return (
        notes.get(MANAGED) == managed_by
        and spec.get("replicas") == replicas
        and len(spec.get("providerIDList") or []) == replicas
        and status.get("replicas") == replicas
        and status.get("readyReplicas") == replicas
        and len(status.get("nodeRefs") or []) == replicas
    )


def _seq(job: Json) -> int:
    return int(job["metadata"]["annotations"][ANN_SEQ])


def _refresh_seqs(system: System) -> list[int]:
    return [_seq(job) for job in jobs_of(system, POOL, "refresh")]


def _first_with(seen: Seen, replicas: int) -> Json:
    """The pool's first version the watch delivered with status.replicas `replicas`."""
    for version in seen.of(POOL):
        if (version.get("status") or {}).get("replicas") == replicas:
            return version
    raise AssertionError(f"no version of {POOL} with {replicas} replicas: {seen.of(POOL)}")


async def test_a_pool_whose_group_grows_on_its_own_shows_four_members_and_nodes(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    group = system.infra / "group-size"
    group.write_text("2\n")
    joiner = NodeJoiner(system.transport, say=lambda who, text: None, namespace=system.kube.ns)
    async with watched(system) as seen, anyio.create_task_group() as tg:
        tg.start_soon(joiner.run)
        await pool_with(objects, POOL, BOUNDS | CLOUD, group)
        await objects.until(
            "MachinePool", POOL, lambda p: sized(p, 2), "MachinePool of 2", within=3 * WAIT
        )
        # The group grows on its own: no Cluster API object changes.
        before = max(_refresh_seqs(system), default=0)
        group.write_text("4\n")
        grown = await objects.until(
            "MachinePool", POOL, lambda p: sized(p, 4), "MachinePool of 4", within=3 * WAIT
        )
        infra = await objects.get("TerraformMachinePool", POOL)
        tg.cancel_scope.cancel()
    assert grown is not None
    assert infra is not None
    ids = infra["spec"]["providerIDList"]
    assert len(set(ids)) == 4
    assert infra["status"]["replicas"] == 4
    assert [i["providerID"] for i in infra["status"]["instances"]] == ids
    assert sorted(grown["spec"]["providerIDList"]) == sorted(ids)
    # Cluster API matched the stand-in Node of each member.
    assert sorted(n["name"] for n in grown["status"]["nodeRefs"]) == sorted(map(node_name, ids))
    # Within two membership intervals: a refresh read the 4, at most the second refresh
    # Job created after the group grew (the one running then may have read the 2). The
    # reading is the state a Job wrote: the running Job's (the write-back reads the state
    # as soon as it changes), else the newest finished one's (a pass that accounts it may
    # also start the next one).
    first = _first_with(seen, 4)
    readers = {first["status"].get("activeJob"), first["status"]["lastRun"]["job"]}
    refreshes = {j["metadata"]["name"]: _seq(j) for j in jobs_of(system, POOL, "refresh")}
    read = sorted(refreshes[job] for job in readers if job in refreshes)
    assert read, f"{readers} read the 4; the refreshes: {refreshes}"
    assert read[0] <= before + 2
    assert len(first["spec"]["providerIDList"]) == 4
    # The autoscaled size never re-applies: one apply, the first.
    assert len(jobs_of(system, POOL, "apply")) == 1
    await _told(system)


async def _told(system: System) -> None:
    """The pool's Events: the members 0 -> 2 and 2 -> 4, the replicas written back (4),
    never a member's id."""
    changed = [e for e in await events_of(system.kube, "MembershipChanged") if _of_pool(e)]
    messages = sorted(e["message"] for e in changed)
    assert messages == [
        "membership changed: 2 added, 0 removed; 2 members",
        "membership changed: 2 added, 0 removed; 4 members",
    ]
    assert all(e["type"] == "Normal" for e in changed)
    written = [e for e in await events_of(system.kube, "ReplicasWrittenBack") if _of_pool(e)]
    assert any("observed 4 replicas" in e["message"] for e in written)
    assert all(e["type"] == "Normal" for e in written)


def _of_pool(event: Json) -> bool:
    involved = event["involvedObject"]
    return bool(involved["kind"] == "TerraformMachinePool" and involved["name"] == POOL)
