"""The pod policy on the runner's Job: every field where the API reads it, the runner's
own environment last, and the restricted profile kept."""

from __future__ import annotations

from controller.core.decide.decision import Run
from controller.core.plan import jobspec
from controller.core.spec.inputs import render
from controller.core.spec.policy import read_policy
from runtime.jsonobj import Json
from tests.builders import module_configmap

POLICY: Json = {
    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "4Gi"}},
    "imagePullSecrets": [{"name": "regcred"}],
    "podSecurityContext": {"runAsUser": 1000},
    "securityContext": {"runAsGroup": 1000},
    "nodeSelector": {"pool": "infra"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "tf"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
    "priorityClassName": "infra-high",
    "env": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
}


def _pod(jobs: Json, *, cred: bool = True) -> Json:
    spec: Json = {"source": {"configMapRef": {"name": "m"}}, "jobs": {"image": "captf:dev", **jobs}}
    if cred:
        spec["identityRef"] = {"kind": "Secret", "name": "creds"}
    obj = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformCluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
        "spec": spec,
    }
    inputs = render(spec, {"m": module_configmap("m")}, {})
    run = Run(op="apply", reason="NoState", retry=1)
    job = jobspec.build_job(obj, run, inputs=inputs, policy=read_policy(spec), seq=1, name="c-a")
    pod: Json = job["spec"]["template"]["spec"]
    return pod


def test_every_field_lands_where_the_api_reads_it() -> None:
    pod = _pod(POLICY)
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["nodeSelector"] == {"pool": "infra"}
    assert pod["tolerations"] == POLICY["tolerations"]
    assert pod["affinity"] == POLICY["affinity"]
    assert pod["priorityClassName"] == "infra-high"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsUser": 1000,
        "fsGroup": 65532,  # the credentials files' group, as before
    }
    [container] = pod["containers"]
    assert container["resources"] == POLICY["resources"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "runAsGroup": 1000,
    }
    names = [e["name"] for e in container["env"]]
    assert names[0] == "HTTPS_PROXY"  # first: the runner's own come after it
    assert "CAPTF_OP" in names


def test_without_policy_fields_the_pod_has_defaults_and_nothing_else() -> None:
    pod = _pod({}, cred=False)
    shaping = {"imagePullSecrets", "nodeSelector", "tolerations", "affinity", "priorityClassName"}
    assert not shaping & set(pod)
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    [container] = pod["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "2Gi"},
    }


def test_an_fs_group_of_the_policy_wins_over_the_runner_s() -> None:
    pod = _pod({"podSecurityContext": {"fsGroup": 3000}})
    assert pod["securityContext"]["fsGroup"] == 3000


def test_a_job_body_shares_nothing_with_the_defaults_or_the_spec() -> None:
    first = _pod({})
    first["containers"][0]["resources"]["limits"]["memory"] = "1Ti"
    first["securityContext"]["seccompProfile"]["type"] = "Localhost"
    first["containers"][0]["securityContext"]["capabilities"]["drop"].clear()
    again = _pod({})
    assert again["containers"][0]["resources"]["limits"]["memory"] == "2Gi"
    assert again["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert again["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
