"""CAPTF as an infrastructure provider under Cluster API's real controllers (issue 19,
deliverable 10): a Cluster whose TerraformCluster and MachineDeployment, MachinePool and
their TerraformMachines run examples/modules/<role> from ConfigMaps, on the `cluster`
server with Cluster API's manager (`capi_cluster`), the CAPTF controller and a process
node (`system`), and kube-controller-manager.

Written against the owners and contract interface (spec.source.configMapRef; objects act
for their Cluster API owners; contract outputs written back), which other branches bring:
the module is skipped until they are merged. The helpers it uses are exercised today by
test_capi_objects.py."""

from __future__ import annotations

from datetime import datetime

import pytest

from controller.core.basics.timefmt import parse_time
from controller.dev.clusterapi import ClusterApi
from runtime.jsonobj import Json
from tests.e2e.capi_objects import (
    MODULES,
    CapiObjects,
    SpecStyle,
    condition,
    infrastructure_provisioned,
)
from tests.e2e.system import WAIT, System, ended, finished_at

pytestmark = [
    pytest.mark.kube,
    pytest.mark.capi,
    pytest.mark.e2e,
]

CLUSTER = "c1"
WORKERS = "c1-md"
POOL = "c1-pool"
# A machine module that fails on every apply: the example's files and one resource more,
# refused at plan time as a cloud API would refuse it. (A provisioner that fails instead
# taints the resource: the retry then plans a replacement, and the destructive-plan guard
# rightly holds it for approval.)
FAILING = """resource "terraform_data" "fail" {
  lifecycle {
    precondition {
      condition     = false
      error_message = "simulated cloud API error: quota exceeded"
    }
  }
}
"""


async def provisioned_cluster(system: System) -> CapiObjects:
    """The credentials, the role modules, the Cluster with its TerraformCluster and the
    workload kubeconfig (this server), once the Cluster's infrastructure is provisioned."""
    objects = CapiObjects(system.kube.server, system.kube.ns, style=SpecStyle.SOURCE)
    await objects.credentials()
    for role in ("cluster", "machine", "machinepool"):
        await objects.module(role)
    await objects.cluster(CLUSTER, module="cluster-module")
    await objects.kubeconfig_secret(CLUSTER)
    await objects.until(
        "Cluster", CLUSTER, infrastructure_provisioned, "InfrastructureProvisioned", within=WAIT
    )
    return objects


async def workers(objects: CapiObjects, replicas: int, *, module: str = "machine-module") -> None:
    await objects.machine_template(WORKERS, cluster=CLUSTER, module=module)
    bootstrap = await objects.bootstrap_secret(f"{CLUSTER}-bootstrap")
    await objects.machine_deployment(
        WORKERS, cluster=CLUSTER, template=WORKERS, replicas=replicas, bootstrap=bootstrap
    )


def jobs_of(system: System, name: str, op: str) -> list[Json]:
    """The object's Jobs of `op` the watch saw, in creation order."""
    found = [
        job
        for job in system.jobs.latest()
        if (job["metadata"].get("labels") or {}).get("captf.io/name") == name
        and (job["metadata"].get("labels") or {}).get("captf.io/op") == op
    ]
    return sorted(found, key=lambda job: job["metadata"]["creationTimestamp"])


async def test_the_cluster_reaches_infrastructure_provisioned_with_its_endpoint(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    cluster = await objects.get("Cluster", CLUSTER)
    infra = await objects.get("TerraformCluster", CLUSTER)
    assert cluster is not None
    assert infra is not None
    endpoint = infra["spec"]["controlPlaneEndpoint"]
    assert endpoint["host"]
    assert cluster["spec"]["controlPlaneEndpoint"] == endpoint
    assert infra["status"]["initialization"]["provisioned"] is True
    ready = condition(cluster, "InfrastructureReady")
    assert ready is not None
    assert ready["status"] == "True"


async def test_three_machines_are_provisioned_then_running_once_their_nodes_exist(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    await workers(objects, replicas=3)
    machines = await objects.machines_in_phase(CLUSTER, 3, "Provisioned", within=3 * WAIT)
    provider_ids = [m["spec"]["providerID"] for m in machines]
    assert all(provider_ids)
    assert len(set(provider_ids)) == 3
    for machine in machines:
        infra = await objects.get("TerraformMachine", machine["metadata"]["name"])
        assert infra is not None
        assert infra["spec"]["providerID"] == machine["spec"]["providerID"]
        assert infra["status"]["initialization"]["provisioned"] is True
    for index, provider_id in enumerate(provider_ids):
        await objects.node(f"{system.kube.ns}-n{index}"[:63], provider_id)
    running = await objects.machines_in_phase(CLUSTER, 3, "Running")
    assert all(m["status"]["nodeRef"]["name"] for m in running)


async def test_scaling_to_one_runs_two_destroy_jobs_before_the_machines_go(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    await workers(objects, replicas=3)
    before = await objects.machines_in_phase(CLUSTER, 3, "Provisioned", within=3 * WAIT)
    await objects.scale("MachineDeployment", WORKERS, 1)
    after = await objects.machines_in_phase(CLUSTER, 1, "Provisioned", within=2 * WAIT)
    gone = {m["metadata"]["name"] for m in before} - {m["metadata"]["name"] for m in after}
    assert len(gone) == 2
    for name in gone:
        [destroy] = jobs_of(system, name, "destroy")
        assert ended(destroy) == "Complete"
        # The Machine waited for the TerraformMachine, which waited for its destroy Job.
        assert await objects.get("TerraformMachine", name) is None
        assert finished_at(destroy) is not None


async def test_a_machinepool_of_two_reaches_two_replicas_with_its_provider_ids(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    bootstrap = await objects.bootstrap_secret(f"{POOL}-bootstrap")
    await objects.machine_pool(
        POOL, cluster=CLUSTER, module="machinepool-module", replicas=2, bootstrap=bootstrap
    )

    def two_ready(pool: Json | None) -> bool:
        # Both members' Nodes found by providerID; the phase may still say ScalingUp until
        # Cluster API's next resync, which nothing here waits for.
        status = (pool or {}).get("status") or {}
        return status.get("replicas") == 2 and status.get("readyReplicas") == 2

    infra = await objects.until(
        "TerraformMachinePool",
        POOL,
        lambda p: ((p or {}).get("status") or {}).get("replicas") == 2,
        "TerraformMachinePool has 2 replicas",
        within=2 * WAIT,
    )
    assert infra is not None
    assert len(infra["spec"]["providerIDList"]) == 2
    assert infra["status"]["ready"] is True
    for index, provider_id in enumerate(infra["spec"]["providerIDList"]):
        await objects.node(f"{system.kube.ns}-p{index}"[:63], provider_id)
    pool = await objects.until("MachinePool", POOL, two_ready, "MachinePool with 2 ready replicas")
    assert pool is not None


async def test_pausing_the_cluster_stops_new_jobs(capi_cluster: ClusterApi, system: System) -> None:
    """Cluster API pauses its own controllers with the Cluster; CAPTF holds every new Job of
    the Cluster's infrastructure too, and starts the one held once the pause ends."""
    objects = await provisioned_cluster(system)
    assert len(jobs_of(system, CLUSTER, "apply")) == 1
    await objects.pause(CLUSTER)
    await objects.patch("TerraformCluster", CLUSTER, {"spec": {"variables": {"zones": ["a"]}}})
    paused = await objects.until(
        "TerraformCluster",
        CLUSTER,
        lambda o: (condition(o, "Paused") or {}).get("status") == "True",
        "the TerraformCluster says Paused",
    )
    assert paused is not None
    # status.next may still name a Job that was running when the pause came (it finishes
    # and is accounted); what matters is that no new one starts.
    await system.clock.sleep(10 * 60)  # ten controller minutes: nothing may start
    assert len(jobs_of(system, CLUSTER, "apply")) == 1
    await objects.pause(CLUSTER, paused=False)
    await system.finished_job(CLUSTER, "apply", 2)


async def test_a_failing_machine_module_backs_off_under_cluster_api(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    files = {p.name: p.read_text() for p in sorted((MODULES / "machine").glob("*.tf"))}
    await objects.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "failing-module"},
            "data": files | {"fail.tf": FAILING},
        }
    )
    await workers(objects, replicas=1, module="failing-module")
    [machine] = await objects.until_listed(
        "Machine", lambda ms: len(ms) == 1, "1 Machine", cluster=CLUSTER
    )
    name = machine["metadata"]["name"]
    for seq in (1, 2, 3):
        await system.finished_job(name, "apply", seq, within=3 * WAIT)
    applies = jobs_of(system, name, "apply")[:3]
    assert [ended(job) for job in applies] == ["Failed"] * 3
    starts = [job["metadata"]["creationTimestamp"] for job in applies]
    ends = [finished_at(job) for job in applies]
    # The seed's rule: each retry waits longer than the one before. The watch recorded the
    # Jobs' times on the controller's clock already (Seen with clock.from_wall).
    gaps = [(parse_time(starts[i + 1]) - _end(ends[i])).total_seconds() for i in range(2)]
    assert gaps[1] > gaps[0] > 0
    still = await objects.get("Machine", name)
    assert still is not None
    # Never provisioned: Cluster API keeps the Machine before Provisioned.
    assert still["status"]["phase"] in ("Pending", "Provisioning")
    assert not (still["spec"].get("providerID"))


async def test_deleting_the_cluster_destroys_machines_then_the_cluster_and_leaves_no_state(
    capi_cluster: ClusterApi, system: System
) -> None:
    objects = await provisioned_cluster(system)
    await workers(objects, replicas=2)
    machines = await objects.machines_in_phase(CLUSTER, 2, "Provisioned", within=3 * WAIT)
    await objects.call("DELETE", objects.path("Cluster", CLUSTER))
    gone = await objects.until(
        "Cluster", CLUSTER, lambda o: o is None, "the Cluster gone", within=3 * WAIT
    )
    assert gone is None
    [cluster_destroy] = jobs_of(system, CLUSTER, "destroy")
    for machine in machines:
        [machine_destroy] = jobs_of(system, machine["metadata"]["name"], "destroy")
        # Cluster API's order: every machine is destroyed before the cluster starts.
        assert _end(finished_at(machine_destroy)) <= _started(cluster_destroy)
    secrets = await objects.call("GET", objects.path("Secret"))
    states = [s for s in secrets["items"] if s["metadata"]["name"].endswith("-state")]
    assert states == []


def _started(job: Json) -> datetime:
    return parse_time(job["status"]["startTime"])


def _end(when: datetime | None) -> datetime:
    assert when is not None
    return when
