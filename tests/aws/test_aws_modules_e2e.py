"""modules/aws end to end, as a team runs them: module images carrying the real AWS
provider, Cluster API's own controllers, the CAPTF controller and a process node whose
runners reach moto as AWS; stand-in kubelets register a Node for each providerID.

One Cluster goes through what a team's first day does, in order (each stage waits on a
condition, with deadlines far above what it takes; each stage's time is printed):

1. the Cluster provisions, its endpoint the network load balancer's DNS name;
2. a MachineDeployment of 2 reaches Running, then scales to 3;
3. a MachinePool of 2 shows its group's members, and follows the group when it is
   resized behind Cluster API's back (boto3 against moto);
4. an instance terminated behind our back is read `terminated`, marked for remediation
   and replaced by a MachineHealthCheck;
5. deleting the Cluster leaves moto with no VPC, live instance, load balancer, target
   group, Auto Scaling group or launch template."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import pytest

from controller.dev.clusterapi import ClusterApi
from controller.dev.workload import NodeJoiner
from runtime.jsonobj import Json
from tests.aws.fault_proxy import FaultProxy
from tests.aws.moto import AMI, Moto, credentials, leftovers
from tests.e2e.capi_objects import (
    CREDENTIALS,
    CapiObjects,
    SpecStyle,
    condition,
    infrastructure_provisioned,
    phase_of,
)
from tests.e2e.system import WAIT, System
from tests.e2e.test_remediation_e2e import machine_health_check, notes_of
from tests.e2e.test_stand_in_nodes_e2e import _externally_managed_control_plane

pytestmark = [pytest.mark.aws, pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]

T = TypeVar("T")

CLUSTER = "c1"
WORKERS = "c1-md"
POOL = "c1-pool"
ZONES = ["us-east-1a", "us-east-1b"]
# Each Job starts the AWS provider (5-11 s, 600-700 MB) in each of its tofu commands.
LONG = 10 * WAIT
REMEDIATE = "cluster.x-k8s.io/remediate-machine"


def image(images: dict[str, str], role: str) -> Json:
    return {"image": images[role], "imagePullPolicy": "IfNotPresent"}


async def timed(what: str, stage: Callable[[], Awaitable[T]]) -> T:
    started = time.monotonic()
    done = await stage()
    print(f"{what}: {time.monotonic() - started:.0f}s")
    return done


async def test_a_cluster_on_aws_from_provisioning_to_deletion(
    capi_cluster: ClusterApi,
    aws_system: System,
    aws_images: dict[str, str],
    moto: Moto,
    proxy: FaultProxy,
) -> None:
    system = aws_system
    objects = CapiObjects(system.kube.server, system.kube.ns, style=SpecStyle.SOURCE)
    await objects.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": CREDENTIALS},
            "stringData": credentials(proxy.url),
        }
    )
    cluster = await timed("cluster provisioned", lambda: provisioned(objects, aws_images, moto))
    await _externally_managed_control_plane(system)
    async with anyio.create_task_group() as tg:
        joiner = NodeJoiner(system.transport, say=lambda who, text: None, namespace=objects.ns)
        tg.start_soon(joiner.run)
        await timed("2 machines Running, then 3", lambda: deployment(objects, aws_images, moto))
        await timed("pool of 2, resized to 3", lambda: pool(objects, aws_images, moto))
        await timed("a terminated instance replaced", lambda: remediated(objects, moto))
        tg.cancel_scope.cancel()
    await timed("cluster deleted", lambda: deleted(objects, moto, cluster))


async def provisioned(objects: CapiObjects, images: dict[str, str], moto: Moto) -> Json:
    """The Cluster with its TerraformCluster on the cluster image: Provisioned, with the
    load balancer's DNS name as its endpoint."""
    await objects.cluster(
        CLUSTER,
        module="",
        source=image(images, "cluster"),
        variables={"availability_zones": ZONES},
    )
    await objects.kubeconfig_secret(CLUSTER)
    found = await objects.until(
        "Cluster", CLUSTER, infrastructure_provisioned, "InfrastructureProvisioned", within=LONG
    )
    assert found is not None
    [balancer] = moto.client("elbv2").describe_load_balancers()["LoadBalancers"]
    assert balancer["Type"] == "network"
    assert found["spec"]["controlPlaneEndpoint"] == {"host": balancer["DNSName"], "port": 6443}
    infra = await objects.get("TerraformCluster", CLUSTER)
    assert infra is not None
    domains = sorted(d["name"] for d in infra["status"]["failureDomains"])
    assert domains == ZONES
    return found


async def deployment(objects: CapiObjects, images: dict[str, str], moto: Moto) -> None:
    """A MachineDeployment of 2 on the machine image reaches Running (each Machine's Node
    found by its providerID), then 3; every providerID names a live instance."""
    await objects.machine_template(
        WORKERS,
        cluster=CLUSTER,
        module="",
        source=image(images, "machine"),
        variables={"ami_id": AMI, "instance_type": "t3.medium"},
        health={"interval": "1m"},  # one reading a second at the e2e time scale
    )
    bootstrap = await objects.bootstrap_secret(f"{CLUSTER}-bootstrap")
    await objects.machine_deployment(
        WORKERS, cluster=CLUSTER, template=WORKERS, replicas=2, bootstrap=bootstrap
    )
    await objects.call(
        "POST",
        f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{objects.ns}/machinehealthchecks",
        machine_health_check(),
    )
    two = await running_workers(objects, 2)
    await objects.scale("MachineDeployment", WORKERS, 3)
    three = await running_workers(objects, 3)
    assert {m["spec"]["providerID"] for m in two} < {m["spec"]["providerID"] for m in three}
    live = running_instances(moto)
    for machine in three:
        zone, instance = machine["spec"]["providerID"].removeprefix("aws:///").split("/")
        assert live[instance] == zone


async def running_workers(objects: CapiObjects, count: int, *, without: str = "") -> list[Json]:
    """Exactly `count` workers, every one Running, `without` not among them."""

    def workers(found: list[Json]) -> list[Json]:
        return [m for m in found if WORKERS in m["metadata"]["name"]]

    def reached(found: list[Json]) -> bool:
        names = {m["metadata"]["name"] for m in workers(found)}
        running = all(phase_of(m) == "Running" for m in workers(found))
        return len(names) == count and running and without not in names

    found = await objects.until_listed(
        "Machine", reached, f"{count} Machines Running", cluster=CLUSTER, within=LONG
    )
    return workers(found)


def running_instances(moto: Moto) -> dict[str, str]:
    """Instance id -> zone, of every running instance."""
    found = moto.client("ec2").describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["running"]}]
    )
    return {
        i["InstanceId"]: i["Placement"]["AvailabilityZone"]
        for r in found["Reservations"]
        for i in r["Instances"]
    }


async def pool(objects: CapiObjects, images: dict[str, str], moto: Moto) -> None:
    """A MachinePool of 2 lists its group's members; the group resized to 3 outside
    Cluster API shows 3 members and 3 replicas at the next membership reading."""
    bootstrap = await objects.bootstrap_secret(f"{POOL}-bootstrap")
    await objects.machine_pool(
        POOL,
        cluster=CLUSTER,
        module="",
        replicas=2,
        bootstrap=bootstrap,
        source=image(images, "machinepool"),
        variables={"ami_id": AMI, "instance_type": "t3.medium"},
        membership={"interval": "10m"},  # a reading every 10 s at the e2e time scale
    )
    scaling = moto.client("autoscaling")
    await members_are(objects, scaling, 2)
    [group] = scaling.describe_auto_scaling_groups()["AutoScalingGroups"]
    scaling.set_desired_capacity(
        AutoScalingGroupName=group["AutoScalingGroupName"], DesiredCapacity=3
    )
    await members_are(objects, scaling, 3)

    # The membership reading writes spec.providerIDList, then the status: a read between
    # the two writes shows the new list beside the old count.
    def counted(obj: Json | None) -> bool:
        return ((obj or {}).get("status") or {}).get("replicas") == 3

    await objects.until("TerraformMachinePool", POOL, counted, "status.replicas 3", within=LONG)


async def members_are(objects: CapiObjects, scaling: Any, count: int) -> Json:
    """The TerraformMachinePool once its providerIDList is the group's `count` members,
    and the MachinePool's the same."""

    def group_ids() -> list[str]:
        [group] = scaling.describe_auto_scaling_groups()["AutoScalingGroups"]
        return sorted(
            f"aws:///{i['AvailabilityZone']}/{i['InstanceId']}" for i in group["Instances"]
        )

    def listed(obj: Json | None) -> bool:
        ids = sorted(((obj or {}).get("spec") or {}).get("providerIDList") or [])
        return len(ids) == count and ids == group_ids()

    infra = await objects.until(
        "TerraformMachinePool", POOL, listed, f"the pool's {count} members", within=LONG
    )
    assert infra is not None
    await objects.until("MachinePool", POOL, listed, f"the MachinePool's {count} IDs", within=LONG)
    return infra


async def remediated(objects: CapiObjects, moto: Moto) -> None:
    """One worker's instance terminated with boto3: its TerraformMachine reads it
    terminated, marks the Machine, and the MachineHealthCheck has it replaced."""
    before = await running_workers(objects, 3)
    victim = before[0]
    name = victim["metadata"]["name"]
    instance = victim["spec"]["providerID"].rsplit("/", 1)[-1]
    moto.client("ec2").terminate_instances(InstanceIds=[instance])

    def read_terminated(obj: Json | None) -> bool:
        health = condition(obj, "InfrastructureHealthy") or {}
        return health.get("reason") == "InstanceTerminated"

    await objects.until("TerraformMachine", name, read_terminated, "read terminated", within=LONG)
    marked = await objects.until(
        "Machine",
        name,
        lambda m: m is None or REMEDIATE in notes_of(m),
        "the Machine marked for remediation",
        within=LONG,
    )
    assert marked is None or REMEDIATE in notes_of(marked)
    await running_workers(objects, 3, without=name)
    assert await objects.get("TerraformMachine", name) is None
    assert instance not in running_instances(moto)


async def deleted(objects: CapiObjects, moto: Moto, cluster: Json) -> None:
    """The Cluster deleted: every destroy Job ran, and moto holds nothing of it."""
    await objects.call("DELETE", objects.path("Cluster", CLUSTER))
    await objects.until("Cluster", CLUSTER, lambda c: c is None, "the Cluster gone", within=LONG)
    assert await objects.list_of("TerraformMachine") == []
    assert await objects.get("TerraformCluster", CLUSTER) is None
    left = leftovers(moto)
    assert left == {key: [] for key in left}, left
