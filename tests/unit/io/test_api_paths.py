"""The paths of what controller/ reads and writes, all from one table."""

from __future__ import annotations

from controller.core.basics.names import CLUSTER, GROUP, KINDS, MACHINE, VERSION
from controller.io import api


def test_captf_paths_come_from_the_group_and_version() -> None:
    root = f"/apis/{GROUP}/{VERSION}"
    assert api.object_path(CLUSTER, "ns", "c1") == f"{root}/namespaces/ns/terraformclusters/c1"
    assert api.object_path(MACHINE, None) == f"{root}/terraformmachines"
    status = api.status_path({"kind": CLUSTER, "metadata": {"namespace": "ns", "name": "c1"}})
    assert status == f"{root}/namespaces/ns/terraformclusters/c1/status"
    assert set(api.OBJECTS) == set(KINDS)


def test_core_and_named_group_paths() -> None:
    assert api.job_path("ns") == "/apis/batch/v1/namespaces/ns/jobs"
    assert api.job_path("ns", "j") == "/apis/batch/v1/namespaces/ns/jobs/j"
    assert api.secret_path(None) == "/api/v1/secrets"
    assert api.lease_path("ns", "l") == "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
    token = api.resource_path(api.SERVICE_ACCOUNTS, "ns", "sa", sub="token")
    assert token == "/api/v1/namespaces/ns/serviceaccounts/sa/token"


def test_a_cluster_scoped_resource_has_no_namespace() -> None:
    assert api.resource_path(api.NODES, "ignored", "n1") == "/api/v1/nodes/n1"
    assert api.resource_path(api.NAMESPACES) == "/api/v1/namespaces"
