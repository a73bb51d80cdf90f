"""The objects under test and the changes made to them.

Families of five: a cluster `fNN`, its pool `fNN-pool` and three machines `fNN-mK` in
that pool. A family shares one module ConfigMap, so a module change makes the cluster
and its members all want to apply at once (the cluster/member exclusion is contended);
each object reads `fail` from a Secret of its own, so any object, machines included
(whose inputs are immutable), can be made to fail or succeed by editing that Secret.
The module is Terraform's built-in `terraform_data` with a precondition: a failing apply
fails at plan time, in about the time a succeeding one takes."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from runtime.errors import ApiError
from runtime.transport import Transport

Json = dict[str, Any]
MERGE = "application/merge-patch+json"
API = "/apis/infrastructure.cluster.x-k8s.io/v1alpha1"
PLURAL = {
    "TerraformCluster": "terraformclusters",
    "TerraformMachinePool": "terraformmachinepools",
    "TerraformMachine": "terraformmachines",
}
MACHINES_PER_FAMILY = 3


def module(revision: int) -> str:
    return f"""\
variable "size" {{
  default = 1
}}
variable "fail" {{
  default = "false"
}}
locals {{
  revision = {revision}
}}
resource "terraform_data" "this" {{
  input = "${{var.size}}-${{local.revision}}"
  lifecycle {{
    precondition {{
      condition     = var.fail != "true"
      error_message = "this object is set to fail"
    }}
  }}
}}
"""


@dataclass(frozen=True)
class Member:
    kind: str
    name: str
    family: str

    @property
    def is_cluster(self) -> bool:
        return self.kind == "TerraformCluster"


def members(families: int) -> list[Member]:
    out = []
    for f in range(families):
        family = f"f{f:02d}"
        out.append(Member("TerraformCluster", family, family))
        out.append(Member("TerraformMachinePool", f"{family}-pool", family))
        out += [
            Member("TerraformMachine", f"{family}-m{k}", family) for k in range(MACHINES_PER_FAMILY)
        ]
    return out


class Workload:
    def __init__(self, transport: Transport, namespace: str, objects: int, rng: random.Random):
        self.t = transport
        self.ns = namespace
        self.rng = rng
        self.members = members(max(1, objects // (2 + MACHINES_PER_FAMILY)))
        self.revisions: dict[str, int] = {}

    def _core(self, plural: str, name: str = "") -> str:
        base = f"/api/v1/namespaces/{self.ns}/{plural}"
        return f"{base}/{name}" if name else base

    def _captf(self, kind: str, name: str = "") -> str:
        base = f"{API}/namespaces/{self.ns}/{PLURAL[kind]}"
        return f"{base}/{name}" if name else base

    async def create(self) -> None:
        await self.t.request(
            "POST",
            self._core("secrets"),
            body={"metadata": {"name": "creds"}, "stringData": {"TOKEN": "t"}},
        )
        for m in self.members:
            if m.is_cluster:
                self.revisions[m.family] = 1
                body = {"metadata": {"name": f"{m.family}-module"}, "data": {"main.tf": module(1)}}
                await self.t.request("POST", self._core("configmaps"), body=body)
            secret = {"metadata": {"name": f"{m.name}-vars"}, "stringData": {"fail": "false"}}
            await self.t.request("POST", self._core("secrets"), body=secret)
            await self.t.request("POST", self._captf(m.kind), body=self._object(m))

    def _object(self, m: Member) -> Json:
        spec: Json = {
            "source": {"configMapRef": {"name": f"{m.family}-module"}},
            "variables": {"size": 1},
            "variablesFrom": [{"secretRef": {"name": f"{m.name}-vars", "key": "fail"}}],
            "credentialsRef": {"name": "creds"},
            "jobs": {"image": "captf:dev", "failedJobsHistoryLimit": 2},
        }
        if not m.is_cluster:
            spec["clusterRef"] = {"name": m.family}
        if m.kind == "TerraformMachine":
            spec["poolRef"] = {"name": f"{m.family}-pool"}
        return {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": m.kind,
            "metadata": {"name": m.name},
            "spec": spec,
        }

    # -- changes ------------------------------------------------------------------------

    async def change_spec(self) -> str:
        """A new `size` on a cluster or pool (machines' variables are immutable)."""
        m = self.rng.choice([m for m in self.members if m.kind != "TerraformMachine"])
        size = self.rng.randint(1, 9)
        patch = {"spec": {"variables": {"size": size}}}
        await self.t.request("PATCH", self._captf(m.kind, m.name), body=patch, content_type=MERGE)
        return f"{m.name} size={size}"

    async def change_module(self, family: str | None = None) -> str:
        family = family or self.rng.choice(sorted(self.revisions))
        self.revisions[family] += 1
        patch = {"data": {"main.tf": module(self.revisions[family])}}
        path = self._core("configmaps", f"{family}-module")
        await self.t.request("PATCH", path, body=patch, content_type=MERGE)
        return f"{family} module revision {self.revisions[family]}"

    async def set_fail(self, name: str, fail: bool) -> None:
        patch = {"stringData": {"fail": "true" if fail else "false"}}
        path = self._core("secrets", f"{name}-vars")
        await self.t.request("PATCH", path, body=patch, content_type=MERGE)

    async def toggle_fail(self, fail_ratio: float) -> str:
        m = self.rng.choice(self.members)
        fail = self.rng.random() < fail_ratio
        await self.set_fail(m.name, fail)
        return f"{m.name} fail={fail}"

    async def all_succeed(self) -> None:
        for m in self.members:
            await self.set_fail(m.name, False)

    async def delete_job(self, name: str) -> bool:
        """Deletes a Job as kubectl does (background propagation); False if already gone."""
        path = f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}"
        try:
            await self.t.request("DELETE", path, body={"propagationPolicy": "Background"})
        except ApiError as err:
            if err.status == 404:
                return False
            raise
        return True
