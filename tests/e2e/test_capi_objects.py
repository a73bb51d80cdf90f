"""The helpers of tests/e2e/capi_objects.py against Cluster API's real manager, today:
what they create is admitted by Cluster API's webhooks and our CRDs, and Cluster API's
controllers act on it (Machines made from a MachineDeployment, each with a TerraformMachine
cloned from the template). With the CAPTF controller and kube-controller-manager beside
it, on the same server, the three keep to their own objects.

The Terraform objects are suspended: what CAPTF does for Cluster API owners is the subject
of test_clusterapi_e2e.py, not of these."""

from __future__ import annotations

import pytest

from controller.dev.clusterapi import ClusterApi
from runtime.envtest import ApiServer
from tests.e2e.capi_objects import CapiObjects, spec_style
from tests.e2e.system import System

pytestmark = [pytest.mark.kube, pytest.mark.capi]
CLONED_FROM = "cluster.x-k8s.io/cloned-from-name"


async def workers(objects: CapiObjects, replicas: int) -> None:
    """A Cluster `c1` and a MachineDeployment `c1-md` of `replicas`, all suspended."""
    await objects.credentials()
    cluster_module = await objects.module("cluster")
    machine_module = await objects.module("machine")
    await objects.cluster("c1", module=cluster_module, suspend=True)
    await objects.machine_template("c1-md", cluster="c1", module=machine_module, suspend=True)
    bootstrap = await objects.bootstrap_secret("c1-bootstrap")
    await objects.machine_deployment(
        "c1-md", cluster="c1", template="c1-md", replicas=replicas, bootstrap=bootstrap
    )


async def test_a_machinedeployment_makes_machines_with_cloned_terraformmachines(
    capi_cluster: ClusterApi, cluster: ApiServer, cluster_namespace: str
) -> None:
    objects = CapiObjects(cluster, cluster_namespace, style=spec_style(cluster))
    await workers(objects, replicas=3)
    await objects.until_owned("TerraformCluster", "c1", "Cluster", "c1")
    deployment = await objects.get("MachineDeployment", "c1-md")
    assert deployment is not None
    assert deployment["spec"]["selector"]["matchLabels"]  # the defaulting webhook ran
    machines = await objects.until_listed(
        "Machine", lambda ms: len(ms) == 3, "3 Machines", cluster="c1"
    )
    template = await objects.get("TerraformMachineTemplate", "c1-md")
    assert template is not None
    for machine in machines:
        name = machine["metadata"]["name"]
        assert machine["spec"]["bootstrap"]["dataSecretName"] == "c1-bootstrap"
        infra = await objects.until_owned("TerraformMachine", name, "Machine", name)
        assert infra["metadata"]["annotations"][CLONED_FROM] == "c1-md"
        assert infra["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "c1"
        cloned = template["spec"]["template"]["spec"]
        assert {key: infra["spec"].get(key) for key in cloned} == cloned


@pytest.mark.e2e
async def test_cluster_api_the_controller_and_kube_controller_manager_coexist(
    capi_cluster: ClusterApi, system: System
) -> None:
    """All three on one server: Cluster API makes its Machines, kube-controller-manager's
    garbage collector leaves what has live owners, and the CAPTF controller, still running,
    writes nothing to Cluster API's objects."""
    server = system.kube.server
    objects = CapiObjects(server, system.kube.ns, style=spec_style(server))
    await workers(objects, replicas=2)
    machines = await objects.until_listed(
        "Machine", lambda ms: len(ms) == 2, "2 Machines", cluster="c1"
    )
    for machine in machines:
        name = machine["metadata"]["name"]
        await objects.until_owned("TerraformMachine", name, "Machine", name)
    system.check()
    for kind, name in [("Cluster", "c1"), ("MachineDeployment", "c1-md")]:
        obj = await objects.get(kind, name)
        assert obj is not None
        managers = {entry["manager"] for entry in obj["metadata"].get("managedFields") or []}
        assert not any("captf" in manager for manager in managers), managers
