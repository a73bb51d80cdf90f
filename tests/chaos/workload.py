"""The objects under test and the changes made to them.

Families of five: a cluster `fNN`, its pool `fNN-pool` and three machines `fNN-mK` that
depend on the pool. Each CAPTF object acts for a Cluster API object of its name (a
`Cluster`, a `MachinePool`, `Machine`s), which the workload creates and whose part it
plays instead of running Cluster API's manager (see docs/chaos.md): each CAPTF object is
created with the controller owner reference Cluster API would set, members with the
`cluster.x-k8s.io/cluster-name` label, the family's bootstrap data Secret exists, and
the Cluster says its infrastructure is provisioned from the start. A family shares one
module ConfigMap, so a module change makes the cluster
and its members all want to apply at once (the cluster/member exclusion is contended);
each object reads `fail` from a Secret of its own, so any object, machines included
(whose inputs are immutable), can be made to fail or succeed by editing that Secret.
The module is Terraform's built-in `terraform_data` with a precondition: a failing apply
fails at plan time, in about the time a succeeding one takes. It does not declare
`captf_contract`, so it runs as its own root and writes nothing back for Cluster API:
an object is Ready once its current inputs are applied (controller/core/plan/status.py),
which is what the report's convergence check reads. It still outputs a `health` that is
running, as it had to while the controller waited on the contract readings of any
module (the runner reads a contract kind's outputs whatever the module, and a reading
without health counted as pending, refreshed every 5 min for ever); the controller now
ignores the readings of a module outside the contract (docs/decisions.md), and the
output stays so that runs before and after compare."""

from __future__ import annotations

import random
from dataclasses import dataclass

from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.transport import Transport
from tests.kube.harness import owner_reference

MERGE = "application/merge-patch+json"
API = "/apis/infrastructure.cluster.x-k8s.io/v1beta1"
CAPTF_API_VERSION = "infrastructure.cluster.x-k8s.io/v1beta1"
CAPI_API_VERSION = "cluster.x-k8s.io/v1beta2"
CAPI_API = f"/apis/{CAPI_API_VERSION}"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
PLURAL = {
    "TerraformCluster": "terraformclusters",
    "TerraformMachinePool": "terraformmachinepools",
    "TerraformMachine": "terraformmachines",
}
# The Cluster API kind each CAPTF kind acts for, and its plural.
OWNER = {
    "TerraformCluster": ("Cluster", "clusters"),
    "TerraformMachinePool": ("MachinePool", "machinepools"),
    "TerraformMachine": ("Machine", "machines"),
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
output "health" {{
  value = {{ state = "running", healthy = true, message = null, reasons = [] }}
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

    @property
    def owner_kind(self) -> str:
        return OWNER[self.kind][0]


def bootstrap_secret(family: str) -> str:
    return f"{family}-bootstrap"


def capi_owner(m: Member) -> Json:
    """The Cluster API object `m` acts for, as a user (or a template) would create it: its
    infrastructureRef names `m`, a member's names its cluster and bootstrap data."""
    infra = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": m.kind, "name": m.name}
    meta: Json = {"name": m.name}
    if m.is_cluster:
        return {
            "apiVersion": CAPI_API_VERSION,
            "kind": "Cluster",
            "metadata": meta,
            "spec": {"infrastructureRef": infra},
        }
    meta["labels"] = {CLUSTER_NAME_LABEL: m.family}
    machine = {
        "clusterName": m.family,
        "bootstrap": {"dataSecretName": bootstrap_secret(m.family)},
        "infrastructureRef": infra,
    }
    if m.kind == "TerraformMachine":
        spec: Json = machine
    else:
        spec = {"clusterName": m.family, "replicas": 1, "template": {"spec": machine}}
    return {"apiVersion": CAPI_API_VERSION, "kind": m.owner_kind, "metadata": meta, "spec": spec}


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

    def _capi(self, kind: str, name: str = "") -> str:
        base = f"{CAPI_API}/namespaces/{self.ns}/{OWNER[kind][1]}"
        return f"{base}/{name}" if name else base

    async def create(self) -> None:
        await self.t.request(
            "POST",
            self._core("secrets"),
            body={"metadata": {"name": "creds"}, "stringData": {"TOKEN": "t"}},
        )
        for m in self.members:
            if m.is_cluster:
                await self._create_family(m.family)
            secret = {"metadata": {"name": f"{m.name}-vars"}, "stringData": {"fail": "false"}}
            await self.t.request("POST", self._core("secrets"), body=secret)
            owner = await self.t.request("POST", self._capi(m.kind), body=capi_owner(m))
            await self.t.request("POST", self._captf(m.kind), body=self._object(m, owner))
        await self.provision_clusters()

    async def _create_family(self, family: str) -> None:
        """The family's module and its bootstrap data, as a bootstrap provider writes it
        (the data under `value`)."""
        self.revisions[family] = 1
        body = {"metadata": {"name": f"{family}-module"}, "data": {"main.tf": module(1)}}
        await self.t.request("POST", self._core("configmaps"), body=body)
        bootstrap = {
            "metadata": {"name": bootstrap_secret(family), "labels": {CLUSTER_NAME_LABEL: family}},
            "type": "cluster.x-k8s.io/secret",
            "stringData": {"format": "cloud-config", "value": "#cloud-config\n"},
        }
        await self.t.request("POST", self._core("secrets"), body=bootstrap)

    async def provision_clusters(self) -> None:
        """Plays Cluster API's Cluster controller: every Cluster's infrastructure is
        provisioned. The workload's module writes nothing back (no contract), so Cluster API
        itself would never set it; a member still waits for its TerraformCluster to be
        Ready (applied at its current inputs) before it starts."""
        status = {"status": {"initialization": {"infrastructureProvisioned": True}}}
        for m in self.members:
            if m.is_cluster:
                path = self._capi(m.kind, m.name) + "/status"
                await self.t.request("PATCH", path, body=status, content_type=MERGE)

    def _object(self, m: Member, owner: Json) -> Json:
        spec: Json = {
            "source": {"configMapRef": {"name": f"{m.family}-module"}},
            "variables": {"size": 1},
            "variablesFrom": [{"secretRef": {"name": f"{m.name}-vars", "key": "fail"}}],
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev", "failedJobsHistoryLimit": 2},
        }
        meta: Json = {"name": m.name, "ownerReferences": [owner_reference(owner)]}
        if not m.is_cluster:
            meta["labels"] = {CLUSTER_NAME_LABEL: m.family}
        if m.kind == "TerraformMachine":
            spec["dependsOn"] = [{"kind": "TerraformMachinePool", "name": f"{m.family}-pool"}]
        return {"apiVersion": CAPTF_API_VERSION, "kind": m.kind, "metadata": meta, "spec": spec}

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
