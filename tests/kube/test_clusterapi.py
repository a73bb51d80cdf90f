"""Cluster API's core manager, built from Go modules, on the session's API server.

What only the real manager can do: its Cluster controller adds the finalizer, writes
status and owns the control plane, and on deletion deletes the control plane and then
removes the finalizer; its defaulting webhook (called by
url) fills in a MachineDeployment's selector; its validating webhook refuses a
selector that does not match the template. The CRDs serve v1beta2 alone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from controller.dev.clusterapi import ClusterApi, ClusterApiMissing, capi_dir
from runtime.envtest import ApiServer, RequestFailed
from runtime.jsonobj import Json
from tests.capi_support import CONTROL_PLANE_CRD, CONTROL_PLANES

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.asyncio(loop_scope="module")]

API = "/apis/cluster.x-k8s.io/v1beta2"
CLUSTER_NAME = "cluster.x-k8s.io/cluster-name"
DEPLOYMENT_NAME = "cluster.x-k8s.io/deployment-name"


@pytest.fixture(scope="session")
def capi_build() -> Path:
    """The hack/capi build; the test skips when there is none. Asked for before
    `apiserver`, so a missing build skips before the API server starts."""
    try:
        return capi_dir(build=False)
    except ClusterApiMissing as exc:
        pytest.skip(f"no Cluster API build ({exc}); build it with `make capi`")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def capi(
    capi_build: Path, apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ClusterApi]:
    crds = tmp_path_factory.mktemp("capi-test-crds")
    (crds / "controlplane.yaml").write_text(json.dumps(CONTROL_PLANE_CRD))
    await asyncio.to_thread(apiserver.install_crds, crds)
    async with ClusterApi(apiserver, bin_dir=capi_build) as running:
        yield running


async def call(server: ApiServer, method: str, path: str, body: object = None) -> Json:
    return await asyncio.to_thread(server.request, method, path, body)


async def get(server: ApiServer, path: str) -> Json | None:
    try:
        return await call(server, "GET", path)
    except RequestFailed as error:
        if error.status != 404:
            raise
        return None


async def eventually(
    server: ApiServer, path: str, check: Callable[[Json | None], bool]
) -> Json | None:
    """The object at `path` (None once it is gone) as soon as `check` accepts it, within a
    minute (the manager requeues with backoff on a loaded machine)."""
    last: Json | None = None
    try:
        async with asyncio.timeout(60):
            while not check(last := await get(server, path)):  # noqa: ASYNC110
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"{path} never passed the check; last: {last}") from None
    return last


def cluster(name: str, control_plane: str) -> Json:
    """A Cluster with no infrastructureRef, its control plane an ExampleControlPlane."""
    ref = {
        "apiGroup": "controlplane.cluster.x-k8s.io",
        "kind": "ExampleControlPlane",
        "name": control_plane,
    }
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"controlPlaneRef": ref},
    }


def machine_deployment(name: str, *, selector: Json | None = None) -> Json:
    spec: Json = {
        "clusterName": "c1",
        "template": {
            "spec": {
                "clusterName": "c1",
                "bootstrap": {"dataSecretName": "c1-bootstrap"},
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "ExampleMachineTemplate",
                    "name": "workers",
                },
            }
        },
    }
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineDeployment",
        "metadata": {"name": name},
        "spec": spec,
    }


async def test_only_v1beta2_is_served(capi: ClusterApi, apiserver: ApiServer) -> None:
    assert "clusters.cluster.x-k8s.io" in capi.crds
    with pytest.raises(RequestFailed) as refused:
        await call(apiserver, "GET", "/apis/cluster.x-k8s.io/v1beta1")
    assert refused.value.status == 404
    group = await call(apiserver, "GET", "/apis/cluster.x-k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1beta2"]


async def test_the_cluster_controller_reconciles_and_deletes(
    capi: ClusterApi, apiserver: ApiServer, namespace: str
) -> None:
    path = f"{API}/namespaces/{namespace}/clusters/c1"
    cp_path = f"{CONTROL_PLANES}/namespaces/{namespace}/examplecontrolplanes/c1-cp"
    control_plane = {
        "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1",
        "kind": "ExampleControlPlane",
        "metadata": {"name": "c1-cp"},
        "spec": {},
    }
    await call(apiserver, "POST", cp_path.rsplit("/", 1)[0], control_plane)
    await call(apiserver, "POST", f"{API}/namespaces/{namespace}/clusters", cluster("c1", "c1-cp"))

    def reconciled(obj: Json | None) -> bool:
        status = (obj or {}).get("status") or {}
        provisioned = (status.get("initialization") or {}).get("infrastructureProvisioned")
        finalizers = (obj or {}).get("metadata", {}).get("finalizers") or []
        return "cluster.cluster.x-k8s.io" in finalizers and provisioned is True

    reconciled_cluster = await eventually(apiserver, path, reconciled)
    assert reconciled_cluster is not None
    assert reconciled_cluster["status"].get("conditions"), "the controller writes conditions"

    def owned(obj: Json | None) -> bool:
        owners = (obj or {}).get("metadata", {}).get("ownerReferences") or []
        return any(o["kind"] == "Cluster" and o["name"] == "c1" for o in owners)

    await eventually(apiserver, cp_path, owned)
    await call(apiserver, "DELETE", path)
    # No garbage collector runs here: the Cluster controller deletes the control plane, and
    # only it removes the Cluster's finalizer.
    assert await eventually(apiserver, cp_path, lambda obj: obj is None) is None
    assert await eventually(apiserver, path, lambda obj: obj is None) is None


async def test_the_defaulting_webhook_fills_in_the_selector(
    capi: ClusterApi, apiserver: ApiServer, namespace: str
) -> None:
    collection = f"{API}/namespaces/{namespace}/machinedeployments"
    # `selector` is required by the CRD: only the webhook, called first, can fill it in.
    created = await call(apiserver, "POST", collection, machine_deployment("workers"))
    spec = created["spec"]
    assert spec["selector"]["matchLabels"] == {CLUSTER_NAME: "c1", DEPLOYMENT_NAME: "workers"}
    assert spec["template"]["metadata"]["labels"] == spec["selector"]["matchLabels"]
    assert spec["replicas"] == 1
    assert spec["rollout"]["strategy"]["type"] == "RollingUpdate"
    assert created["metadata"]["labels"] == {CLUSTER_NAME: "c1"}


async def test_the_validating_webhook_refuses_a_selector_that_does_not_match(
    capi: ClusterApi, apiserver: ApiServer, namespace: str
) -> None:
    collection = f"{API}/namespaces/{namespace}/machinedeployments"
    bad = machine_deployment("strays", selector={"matchLabels": {"tier": "a"}})
    with pytest.raises(RequestFailed) as refused:
        await call(apiserver, "POST", collection, bad)
    message = refused.value.message
    assert 'admission webhook "validation.machinedeployment.cluster.x-k8s.io"' in message
    assert "must match spec.selector" in message
