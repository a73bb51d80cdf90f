"""Cluster API objects for end-to-end tests, in one namespace of a server where Cluster
API's manager runs (the `capi_cluster` fixture), and waits on what its controllers do.

The Terraform objects are written against the owners interface: the module in
`spec.source.configMapRef`, no clusterRef (the owner Cluster or Machine says it). Until
that lands, `SpecStyle.MODULE` writes today's shape (`spec.module`, and `clusterRef` on
machines and pools); `spec_style` reads which one the installed CRD wants."""

from __future__ import annotations

import asyncio
import base64
import enum
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.dev import controlplane, workload
from runtime.envtest import ApiServer, RequestFailed
from runtime.jsonobj import Json

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "examples" / "modules"
CAPI = "cluster.x-k8s.io/v1beta2"
INFRA = "infrastructure.cluster.x-k8s.io/v1beta1"
INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
CLUSTER_NAME = "cluster.x-k8s.io/cluster-name"
CREDENTIALS = "terraform-credentials"
RUNNER_IMAGE = "captf:dev"
RUNNER_ACCOUNT = "captf-runner"
# Real seconds: Cluster API's controllers requeue with backoff on a loaded machine.
WAIT_SECONDS = 60.0
_POLL_SECONDS = 0.2
_PLURALS = {
    "Cluster": "clusters",
    "ClusterClass": "clusterclasses",
    "Machine": "machines",
    "MachineSet": "machinesets",
    "MachineDeployment": "machinedeployments",
    "MachinePool": "machinepools",
    "TerraformCluster": "terraformclusters",
    "TerraformMachine": "terraformmachines",
    "TerraformMachineTemplate": "terraformmachinetemplates",
    "TerraformMachinePool": "terraformmachinepools",
}


class SpecStyle(enum.Enum):
    SOURCE = "source"  # spec.source.configMapRef, owners instead of clusterRef
    MODULE = "module"  # spec.module.configMapRef and spec.clusterRef (before the owners step)


def spec_style(server: ApiServer) -> SpecStyle:
    """Which shape the TerraformMachine CRD on `server` accepts."""
    crd = server.request(
        "GET",
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/terraformmachines.{INFRA_GROUP}",
    )
    [version] = [v for v in crd["spec"]["versions"] if v["storage"]]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return SpecStyle.SOURCE if "source" in spec else SpecStyle.MODULE


def ref(kind: str, name: str) -> Json:
    group = INFRA_GROUP if kind.startswith("Terraform") else "cluster.x-k8s.io"
    return {"apiGroup": group, "kind": kind, "name": name}


class CapiObjects:
    """Creates and reads Cluster API and CAPTF objects in `namespace` of `server`."""

    def __init__(
        self,
        server: ApiServer,
        namespace: str,
        *,
        style: SpecStyle = SpecStyle.SOURCE,
        infra: str = INFRA,
    ) -> None:
        """`infra`: the apiVersion the Terraform objects are written and read as."""
        self.server = server
        self.ns = namespace
        self.style = style
        self.infra = infra

    # -- plumbing ------------------------------------------------------------------------

    def path(self, kind: str, name: str | None = None) -> str:
        if kind in ("Secret", "ConfigMap"):
            base = f"/api/v1/namespaces/{self.ns}/{kind.lower()}s"
        elif kind == "Node":
            base = "/api/v1/nodes"
        else:
            api = self.infra if kind.startswith("Terraform") else CAPI
            base = f"/apis/{api}/namespaces/{self.ns}/{_PLURALS[kind]}"
        return base if name is None else f"{base}/{name}"

    async def call(self, method: str, path: str, body: object = None, **kw: Any) -> Json:
        result: Json = await asyncio.to_thread(self.server.request, method, path, body, **kw)
        return result

    async def create(self, body: Json) -> Json:
        try:
            return await self.call("POST", self.path(body["kind"]), body)
        except RequestFailed as error:
            raise AssertionError(f"{body['kind']}/{body['metadata']['name']}: {error}") from error

    async def get(self, kind: str, name: str) -> Json | None:
        try:
            return await self.call("GET", self.path(kind, name))
        except RequestFailed as error:
            if error.status != 404:
                raise
            return None

    async def list_of(self, kind: str, *, cluster: str | None = None) -> list[Json]:
        params = {"labelSelector": f"{CLUSTER_NAME}={cluster}"} if cluster else None
        found = await self.call("GET", self.path(kind), params=params)
        items: list[Json] = found["items"]
        return items

    async def patch(self, kind: str, name: str, patch: Json, *, status: bool = False) -> Json:
        path = self.path(kind, name) + ("/status" if status else "")
        return await self.call("PATCH", path, patch, content_type="application/merge-patch+json")

    # -- what the Terraform objects need ------------------------------------------------------

    async def module(self, role: str) -> str:
        """A ConfigMap holding examples/modules/<role>'s files; returns its name."""
        name = f"{role}-module"
        await self.create(workload.module_configmap(role, name))
        return name

    async def credentials(self) -> None:
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": CREDENTIALS}}
        await self.create(body | {"stringData": {"TOKEN": "t"}})

    def infra_spec(self, module: str, *, cluster: str | None = None, **extra: Any) -> Json:
        """A Terraform object's spec running the module in ConfigMap `module`; `cluster`
        names the TerraformCluster for SpecStyle.MODULE machines and pools."""
        spec: Json = {
            "identityRef": {"kind": "Secret", "name": CREDENTIALS},
            "jobs": {"image": RUNNER_IMAGE, "serviceAccountName": RUNNER_ACCOUNT},
        }
        if self.style is SpecStyle.SOURCE:
            spec["source"] = {"configMapRef": {"name": module}}
            # Drift checks are on by default (30 min, issue 30: 30 s at the e2e time
            # scale); the flows here are about other rules, so they turn them off.
            spec["drift"] = {"interval": "0"}
        else:
            spec["module"] = {"configMapRef": {"name": module}}
            if cluster is not None:
                spec["clusterRef"] = {"name": cluster}
        return spec | extra

    def _machine(self, module: str, cluster: str, infra: Json) -> Json:
        """A machine's spec: the health watch (5 min by default, 5 s at the e2e time
        scale) off unless the test asks for it, as the drift checks are."""
        spec = self.infra_spec(module, cluster=cluster, **infra)
        if self.style is SpecStyle.SOURCE and "health" not in infra:
            spec["health"] = {"interval": "0"}
        return spec

    # -- Cluster API objects ---------------------------------------------------------------

    async def cluster(
        self, name: str, *, module: str, control_plane: bool = False, **infra: Any
    ) -> Json:
        """A TerraformCluster and the Cluster whose infrastructure it is (same name); with
        `control_plane`, also `make run`'s LocalControlPlane of that name as the Cluster's
        control plane (its CRD installed: controller.dev.controlplane.CRDS)."""
        await self.create(
            {
                "apiVersion": self.infra,
                "kind": "TerraformCluster",
                "metadata": {"name": name},
                "spec": self.infra_spec(module, **infra),
            }
        )
        spec: Json = {"infrastructureRef": ref("TerraformCluster", name)}
        if control_plane:
            path = controlplane.CONTROL_PLANES.path(self.ns)
            await self.call("POST", path, controlplane.control_plane(name))
            spec["controlPlaneRef"] = controlplane.reference(name)
        return await self.create(
            {"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": name}, "spec": spec}
        )

    async def machine_template(self, name: str, *, cluster: str, module: str, **infra: Any) -> Json:
        return await self.create(
            {
                "apiVersion": self.infra,
                "kind": "TerraformMachineTemplate",
                "metadata": {"name": name},
                "spec": {"template": {"spec": self._machine(module, cluster, infra)}},
            }
        )

    async def bootstrap_secret(
        self, name: str, value: str = "#cloud-config\n", *, format: str = "cloud-config"
    ) -> str:
        """What a bootstrap provider would write: the data under `value`, its `format`."""
        data = {"value": value.encode(), "format": format.encode()}
        await self.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "cluster.x-k8s.io/secret",
                "metadata": {"name": name},
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
            }
        )
        return name

    async def machine_deployment(
        self, name: str, *, cluster: str, template: str, replicas: int, bootstrap: str
    ) -> Json:
        """A MachineDeployment of `replicas`, each Machine's infrastructure cloned from the
        TerraformMachineTemplate `template`, its bootstrap data the Secret `bootstrap`."""
        machine = {
            "clusterName": cluster,
            "version": "v1.35.0",
            "bootstrap": {"dataSecretName": bootstrap},
            "infrastructureRef": ref("TerraformMachineTemplate", template),
        }
        return await self.create(
            {
                "apiVersion": CAPI,
                "kind": "MachineDeployment",
                "metadata": {"name": name},
                "spec": {
                    "clusterName": cluster,
                    "replicas": replicas,
                    "template": {"spec": machine},
                },
            }
        )

    async def machine_pool(
        self, name: str, *, cluster: str, module: str, replicas: int, bootstrap: str, **infra: Any
    ) -> Json:
        """A TerraformMachinePool and the MachinePool of `replicas` whose infrastructure it is."""
        await self.create(
            {
                "apiVersion": self.infra,
                "kind": "TerraformMachinePool",
                "metadata": {"name": name},
                "spec": self.infra_spec(module, cluster=cluster, **infra),
            }
        )
        machine = {
            "clusterName": cluster,
            "version": "v1.35.0",
            "bootstrap": {"dataSecretName": bootstrap},
            "infrastructureRef": ref("TerraformMachinePool", name),
        }
        return await self.create(
            {
                "apiVersion": CAPI,
                "kind": "MachinePool",
                "metadata": {"name": name},
                "spec": {
                    "clusterName": cluster,
                    "replicas": replicas,
                    "template": {"spec": machine},
                },
            }
        )

    async def kubeconfig_secret(self, cluster: str) -> None:
        """`<cluster>-kubeconfig`, pointing at this very API server: the workload cluster
        where Cluster API looks for the Nodes of the cluster's Machines."""
        await self.create(workload.kubeconfig_secret(cluster, self.server.kubeconfig.read_bytes()))

    async def node(self, name: str, provider_id: str) -> Json:
        """A Node with `provider_id`, as a kubelet of that machine would register it."""
        return await self.create(workload.node(provider_id, name))

    async def scale(self, kind: str, name: str, replicas: int) -> Json:
        return await self.patch(kind, name, {"spec": {"replicas": replicas}})

    async def pause(self, cluster: str, paused: bool = True) -> Json:
        return await self.patch("Cluster", cluster, {"spec": {"paused": paused or None}})

    # -- waits ------------------------------------------------------------------------------

    async def until(
        self,
        kind: str,
        name: str,
        check: Callable[[Json | None], bool],
        what: str,
        within: float = WAIT_SECONDS,
    ) -> Json | None:
        """The object (None once gone) as soon as `check` accepts it."""
        last: Json | None = None
        try:
            async with asyncio.timeout(within):
                while not check(last := await self.get(kind, name)):  # noqa: ASYNC110
                    await asyncio.sleep(_POLL_SECONDS)
        except TimeoutError:
            raise AssertionError(f"{what}: not within {within:.0f}s; last: {last}") from None
        return last

    async def until_owned(self, kind: str, name: str, owner_kind: str, owner: str) -> Json:
        """The object once `owner_kind`/`owner` is among its owners."""

        def owned(obj: Json | None) -> bool:
            return owned_by(obj, owner_kind, owner)

        found = await self.until(kind, name, owned, f"{kind}/{name} owned by {owner_kind}/{owner}")
        assert found is not None
        return found

    async def until_listed(
        self,
        kind: str,
        check: Callable[[list[Json]], bool],
        what: str,
        *,
        cluster: str | None = None,
        within: float = WAIT_SECONDS,
    ) -> list[Json]:
        last: list[Json] = []
        try:
            async with asyncio.timeout(within):
                while not check(last := await self.list_of(kind, cluster=cluster)):  # noqa: ASYNC110
                    await asyncio.sleep(_POLL_SECONDS)
        except TimeoutError:
            names = [o["metadata"]["name"] for o in last]
            raise AssertionError(f"{what}: not within {within:.0f}s; last: {names}") from None
        return last

    async def machines_in_phase(
        self, cluster: str, count: int, phase: str, *, within: float = WAIT_SECONDS
    ) -> list[Json]:
        """Exactly `count` Machines of `cluster`, every one in `phase` (Provisioning,
        Provisioned, Running, Deleting, ...)."""

        def reached(machines: list[Json]) -> bool:
            return len(machines) == count and all(phase_of(m) == phase for m in machines)

        return await self.until_listed(
            "Machine", reached, f"{count} Machines {phase}", cluster=cluster, within=within
        )


def phase_of(obj: Json | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def condition(obj: Json | None, kind: str) -> Json | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            found: Json = cond
            return found
    return None


def owned_by(obj: Json | None, kind: str, name: str) -> bool:
    owners = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return any(o["kind"] == kind and o["name"] == name for o in owners)


def infrastructure_provisioned(cluster: Json | None) -> bool:
    status = (cluster or {}).get("status") or {}
    return (status.get("initialization") or {}).get("infrastructureProvisioned") is True
