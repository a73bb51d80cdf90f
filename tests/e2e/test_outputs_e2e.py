"""spec.outputs end to end, with real OpenTofu: the cluster's outputs go to a Secret, the
pool reads them through variablesFrom, and a change of the cluster's outputs re-applies
the pool (its inputs hash follows the Secret)."""

from __future__ import annotations

import base64

import pytest

from controller.core.basics.names import MANAGED_BY
from runtime.jsonobj import Json
from tests.e2e.system import System, ended, result_of
from tests.kube.harness import MERGE

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

CLUSTER_MODULE = """\
variable "name" {
  type = string
}
variable "token" {
  type      = string
  default   = "s3cr3t-token"
  sensitive = true
}
resource "terraform_data" "cluster" {
  input = var.name
}
output "endpoint" {
  value = "https://${terraform_data.cluster.output}.example"
}
output "token" {
  value     = var.token
  sensitive = true
}
"""

POOL_MODULE = """\
variable "dir" {
  type = string
}
variable "endpoint" {
  type = string
}
resource "local_file" "joined" {
  filename = "${var.dir}/pool-endpoint.txt"
  content  = var.endpoint
}
"""


async def _pool(system: System) -> None:
    kube = system.kube
    await kube.call(
        "POST",
        f"/api/v1/namespaces/{kube.ns}/configmaps",
        {"metadata": {"name": "workers-module"}, "data": {"main.tf": POOL_MODULE}},
    )
    body = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformMachinePool",
        "metadata": {"name": "workers"},
        "spec": {
            "source": {"configMapRef": {"name": "workers-module"}},
            "variables": {"dir": str(system.infra)},
            "variablesFrom": [{"secretRef": {"name": "web-outputs", "key": "endpoint"}}],
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"},
            "drift": {"interval": "0"},  # on by default (30 s at the e2e time scale)
            "guard": {"allowDestructive": True},
        },
    }
    await kube.create_member(body, cluster="web")


async def _applied(system: System, name: str, seq: int) -> Json:
    job = await system.finished_job(name, "apply", seq)
    assert ended(job) == "Complete", system.log(job)
    return job


def _secret_data(secret: Json) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


async def test_the_pool_reads_the_clusters_outputs(system: System) -> None:
    await system.create_cluster(
        "web", CLUSTER_MODULE, {"name": "alpha"}, outputs={"secretName": "web-outputs"}
    )
    await _pool(system)
    cluster_apply = await _applied(system, "web", 1)
    assert result_of(cluster_apply)["outputs"] == ["endpoint", "token"]
    assert "s3cr3t-token" not in str(cluster_apply["metadata"]["annotations"])

    secret = await system.kube.secret("web-outputs")
    assert _secret_data(secret) == {"endpoint": "https://alpha.example", "token": "s3cr3t-token"}
    assert secret["metadata"]["labels"] == {"captf.io/outputs-of": "web"} | MANAGED_BY
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "TerraformCluster"

    async def outputs_listed() -> Json | None:
        status = (await system.kube.get("terraformclusters", "web")).get("status") or {}
        return status if status.get("outputs") == ["endpoint", "token"] else None

    await system.until(outputs_listed, "status.outputs of web")

    await _applied(system, "workers", 1)
    joined = system.infra / "pool-endpoint.txt"
    assert joined.read_text() == "https://alpha.example"

    # New cluster outputs: the pool's inputs hash follows the Secret and it re-applies.
    patch = {"spec": {"variables": {"name": "beta"}}}
    await system.kube.call(
        "PATCH", system.kube.captf_path("terraformclusters", "web"), patch, MERGE
    )
    await _applied(system, "web", 2)
    await _applied(system, "workers", 2)
    assert joined.read_text() == "https://beta.example"
