"""The pool's membership status on the real API server: status.instances (as the
write-back writes it, controller/core/plan/writeback.py) and the AutoscalingActive
condition are kept by the CRD's schema, not pruned, and more than 1000 instances are
refused."""

from __future__ import annotations

import pytest

from runtime.envtest import ApiServer, RequestFailed
from runtime.jsonobj import Json

pytestmark = pytest.mark.kube
POOLS = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{ns}/terraformmachinepools"
MERGE = "application/merge-patch+json"


def _pool() -> Json:
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformMachinePool",
        "metadata": {"name": "p1"},
        "spec": {
            "source": {"configMapRef": {"name": "m"}},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"},
        },
    }


def test_instances_and_autoscaling_active_are_kept(apiserver: ApiServer, namespace: str) -> None:
    base = POOLS.format(ns=namespace)
    apiserver.request("POST", base, _pool())
    instance = {
        "providerID": "captf://a",
        "instanceID": "i-a",
        "failureDomain": "z1",
        "state": "running",
        "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}],
    }
    active = {
        "type": "AutoscalingActive",
        "status": "True",
        "reason": "AutoscalingActive",
        "message": "between 1 and 5",
        "lastTransitionTime": "2026-12-04T12:00:00Z",
    }
    status = {"status": {"replicas": 1, "instances": [instance], "conditions": [active]}}
    stored = apiserver.request("PATCH", f"{base}/p1/status", status, MERGE)
    assert stored["status"]["instances"] == [instance]
    assert stored["status"]["conditions"][0]["type"] == "AutoscalingActive"
    too_many = {"status": {"instances": [instance] * 1001}}
    with pytest.raises(RequestFailed) as refused:
        apiserver.request("PATCH", f"{base}/p1/status", too_many, MERGE)
    assert refused.value.status == 422


def test_scale_from_zero_fields_are_kept_and_their_shape_checked(
    apiserver: ApiServer, namespace: str
) -> None:
    """Issue 30 item 3 for a MachinePool: the pool's spec.capacity / spec.nodeInfo and its
    status.capacity, nodeInfo and capacitySource survive the schema (not pruned); a value
    that is no quantity is refused in both."""
    base = POOLS.format(ns=namespace)
    body = _pool()
    body["spec"] |= {
        "capacity": {"cpu": "2", "memory": "4Gi"},
        "nodeInfo": {"architecture": "arm64"},
    }
    created = apiserver.request("POST", base, body)
    assert created["spec"]["capacity"] == {"cpu": "2", "memory": "4Gi"}
    assert created["spec"]["nodeInfo"] == {"architecture": "arm64"}
    shown = {
        "capacity": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
        "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"},
        "capacitySource": {"source": "Spec", "image": "registry.example/pool:1"},
    }
    stored = apiserver.request("PATCH", f"{base}/p1/status", {"status": shown}, MERGE)
    assert {k: stored["status"][k] for k in shown} == shown
    for path, patch in (
        (f"{base}/p1/status", {"status": {"capacity": {"cpu": "four"}}}),
        (f"{base}/p1", {"spec": {"capacity": {"cpu": "four"}}}),
        (f"{base}/p1", {"spec": {"nodeInfo": {"architecture": "sparc"}}}),
    ):
        with pytest.raises(RequestFailed) as refused:
            apiserver.request("PATCH", path, patch, MERGE)
        assert refused.value.status == 422
