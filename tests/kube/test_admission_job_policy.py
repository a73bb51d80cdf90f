"""The runner pod's policy fields on the real API server: the CRD keeps and checks them
(templates too), and the admission webhook refuses a reserved env name and a weakened
security context, naming the field and never the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import Kube
from tests.kube.test_admission_webhook import (
    GROUP_VERSION,
    _cluster,
    _configurations,
    _in_effect,
    _refusal,
    registered,
    serving,
)

pytestmark = pytest.mark.kube

POLICY: Json = {
    "image": "captf:dev",
    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": 4}},
    "imagePullSecrets": [{"name": "regcred"}],
    "podSecurityContext": {"runAsUser": 1000, "fsGroup": 2000},
    "securityContext": {"capabilities": {"drop": ["ALL"]}},
    "nodeSelector": {"node-role/infra": ""},
    "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
    "priorityClassName": "infra",
    "env": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
}


async def test_the_crds_keep_the_policy_fields_and_check_their_shapes(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    stored = await kube.call(
        "POST", kube.captf_path("terraformclusters"), _cluster("kept", jobs=POLICY)
    )
    assert stored["spec"]["jobs"] == POLICY | {
        "activeDeadlineSeconds": 3600,
        "failedJobsHistoryLimit": 3,
        "successfulJobsHistoryLimit": 1,
    }
    template = {
        "apiVersion": GROUP_VERSION,
        "kind": "TerraformMachineTemplate",
        "metadata": {"name": "kept"},
        "spec": {"template": {"spec": _cluster("x", jobs=POLICY)["spec"]}},
    }
    stored = await kube.call("POST", kube.captf_path("terraformmachinetemplates"), template)
    assert stored["spec"]["template"]["spec"]["jobs"]["tolerations"] == POLICY["tolerations"]
    bad: list[tuple[Json, str]] = [
        ({"resources": {"requests": {"cpu": "lots"}}}, "spec.jobs.resources.requests.cpu"),
        ({"tolerations": [{"operator": "Maybe"}]}, "spec.jobs.tolerations[0].operator"),
        ({"priorityClassName": "Not A Name"}, "spec.jobs.priorityClassName"),
        ({"env": [{"value": "x"}]}, "spec.jobs.env[0].name"),
    ]
    for i, (jobs, field) in enumerate(bad):
        body = _cluster(f"bad{i}", jobs={"image": "captf:dev"} | jobs)
        refused = await _refusal(kube, "POST", kube.captf_path("terraformclusters"), body)
        assert field in refused, refused


async def test_the_webhook_refuses_a_reserved_env_name_and_a_weakened_context(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    async with (
        serving(apiserver, namespace, tmp_path) as webhook,
        registered(apiserver, _configurations(webhook, namespace)),
    ):
        await _in_effect(kube)
        clusters = kube.captf_path("terraformclusters")
        env = [{"name": "TF_VAR_size", "value": "s3cret-size"}]
        reserved = await _refusal(
            kube, "POST", clusters, _cluster("env", jobs={"image": "captf:dev", "env": env})
        )
        assert "denied the request" in reserved
        assert "spec.jobs.env[0].name" in reserved
        assert "s3cret-size" not in reserved
        weak = {"image": "captf:dev", "securityContext": {"allowPrivilegeEscalation": True}}
        weakened = await _refusal(kube, "POST", clusters, _cluster("weak", jobs=weak))
        assert "spec.jobs.securityContext.allowPrivilegeEscalation" in weakened
        await kube.call("POST", clusters, _cluster("fine", jobs=POLICY))
        assert await kube.jobs() == []
