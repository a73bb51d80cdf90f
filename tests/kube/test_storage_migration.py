"""The storage version migration on the real API server, under the manifests' RBAC.

Objects of every kind are made while the CRDs serve and store v1alpha1 alone (what v0.1.0
installed); the CRDs are then replaced by today's (v1beta1 stored, v1alpha1 converted by
the controller's webhook), which leaves each listing both versions as stored. The
controller, started with a TokenRequest token of its ServiceAccount bound to the
manifests' ClusterRole and serving its conversion webhook on loopback, rewrites them all
and trims every CRD's storedVersions to v1beta1. Then the webhook is cut off (the CRDs
point at a port nothing serves): an object still kept as v1alpha1 could no longer be
read as v1beta1, and every one is. The audit log shows no request refused and each of
the migration's grants used (test_rbac_audit exempts them: its controller watches one
namespace and meets only current CRDs).

Then the way back of docs/upgrading.md ("Rolling back"): v1alpha1 made the storage
version again, the controller restarted rewrites every object as v1alpha1 and trims to
it, and release 0.1's CRDs (v1alpha1 alone) install over them, every object as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.core.basics.names import ANN_CONVERSION_DATA, GROUP
from controller.dev.clusterapi import install_crds_only
from controller.dev.install import LoopbackWebhook, free_port
from runtime.envtest import ApiServer
from runtime.envtest.process import terminate_as_interrupt
from runtime.jsonobj import Json
from tests.conversion_support import (
    current_crds,
    older_crds,
    webhook_cert_dir,
    write_crds,
)
from tests.kube.harness import Kube, eventually, running_controller
from tests.kube.test_rbac_audit import _docs, _granted, _path, _requests, _token_kubeconfig, _used

pytestmark = [pytest.mark.kube, pytest.mark.capi]
NS = "migrated"
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
OLD = f"/apis/{GROUP}/v1alpha1"
NEW = f"/apis/{GROUP}/v1beta1"
SPEC = {"source": {"image": "r.example/m:1"}, "jobs": {"image": "captf:dev"}}
_CREDS = {**SPEC, "credentialsRef": {"name": "creds"}}
_IDENTITY = {"secretRef": {"namespace": NS, "name": "s"}, "allowedNamespaces": {"list": [NS]}}
_RULE = {"name": "r", "action": "Deny", "expression": "true", "message": "m"}
_POLICY = {"rules": [_RULE]}
_TARGET = {"target": {"kind": "TerraformCluster", "name": "x", "uid": "u"}}
# One object of every kind, as a v1alpha1 client wrote them: plural, kind, spec.
OBJECTS: list[tuple[str, str, Json]] = [
    ("terraformclusters", "TerraformCluster", _CREDS),
    ("terraformmachinepools", "TerraformMachinePool", SPEC),
    ("terraformmachines", "TerraformMachine", SPEC),
    ("terraformclustertemplates", "TerraformClusterTemplate", {"template": {"spec": _CREDS}}),
    ("terraformmachinetemplates", "TerraformMachineTemplate", {"template": {"spec": SPEC}}),
    ("terraformmachinepooltemplates", "TerraformMachinePoolTemplate", {"template": {"spec": SPEC}}),
    ("terraformplans", "TerraformPlan", _TARGET),
    ("terraformclusteridentities", "TerraformClusterIdentity", _IDENTITY),
    ("terraformpolicies", "TerraformPolicy", _POLICY),
]
MIGRATION_GRANTS = {
    ("apiextensions.k8s.io", "customresourcedefinitions", "get"),
    ("apiextensions.k8s.io", "customresourcedefinitions/status", "patch"),
    (GROUP, "terraformclustertemplates", "list"),
    (GROUP, "terraformclustertemplates", "patch"),
    (GROUP, "terraformpolicies", "patch"),
}


def _collection(root: str, plural: str) -> str:
    cluster_scoped = plural in ("terraformclusteridentities", "terraformpolicies")
    return f"{root}/{plural}" if cluster_scoped else f"{root}/namespaces/{NS}/{plural}"


def _stored(server: ApiServer) -> dict[str, list[str]]:
    return {
        plural: server.request("GET", f"{CRD_API}/{plural}.{GROUP}")["status"]["storedVersions"]
        for plural, _, _ in OBJECTS
    }


async def test_objects_stored_as_v1alpha1_are_rewritten_and_stored_versions_trimmed(
    tmp_path: Path, capi_build: Path
) -> None:
    with terminate_as_interrupt(), ApiServer() as server:
        install_crds_only(server, tmp_path / "capi", capi_build)
        server.install_crds(write_crds(older_crds(), tmp_path / "old"))
        server.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        for plural, kind, spec in OBJECTS:
            obj = {"apiVersion": f"{GROUP}/v1alpha1", "kind": kind, "metadata": {"name": "one"}}
            obj["spec"] = spec
            server.request("POST", _collection(OLD, plural), obj)
        webhook = LoopbackWebhook.make(free_port())
        server.install_crds(write_crds(current_crds(webhook), tmp_path / "new"))
        assert set(map(tuple, _stored(server).values())) == {("v1alpha1", "v1beta1")}

        kube = Kube(server, NS)
        docs = _docs(NS)
        for doc in docs:
            await kube.call("POST", _path(doc, NS), doc)
        kubeconfig = await _token_kubeconfig(kube, server, "captf-controller", tmp_path / "kc")
        certs = webhook_cert_dir(webhook, tmp_path / "certs")
        await _migrated(server, kubeconfig, webhook, certs, "v1beta1")

        # Nothing serves the conversion now: only objects stored as v1beta1 can be read.
        dead = LoopbackWebhook(free_port(), webhook.cert, webhook.key)
        server.install_crds(write_crds(current_crds(dead), tmp_path / "dead"))
        for plural, _, _ in OBJECTS:
            found = server.request("GET", f"{_collection(NEW, plural)}/one")
            assert found["apiVersion"] == f"{GROUP}/v1beta1", plural
        cluster = server.request("GET", f"{_collection(NEW, 'terraformclusters')}/one")
        assert cluster["spec"]["identityRef"] == {"kind": "Secret", "name": "creds"}
        assert ANN_CONVERSION_DATA in cluster["metadata"]["annotations"]
        assert cluster["metadata"]["generation"] == 1  # rewritten, not changed

        entries = _requests(server.audit_log, f"system:serviceaccount:{NS}:captf-controller")
        refused = [
            e["requestURI"] for e in entries if e.get("responseStatus", {}).get("code") == 403
        ]
        assert refused == []
        assert _granted(docs) >= MIGRATION_GRANTS
        assert _used(entries) >= MIGRATION_GRANTS

        # The way back (docs/upgrading.md, "Rolling back"): v1alpha1 made the storage
        # version, the controller restarted, and release 0.1's CRDs then install.
        back = current_crds(webhook)
        for crd in back:
            older, newer = crd["spec"]["versions"]
            older["storage"], newer["storage"] = True, False
        server.install_crds(write_crds(back, tmp_path / "back"))
        await _migrated(server, kubeconfig, webhook, certs, "v1alpha1")
        server.install_crds(write_crds(older_crds(), tmp_path / "old-again"))
        for plural, kind, spec in OBJECTS:
            found = server.request("GET", f"{_collection(OLD, plural)}/one")
            assert _holds(found["spec"], spec), kind  # the API server's defaults beside
            assert ANN_CONVERSION_DATA not in (found["metadata"].get("annotations") or {})


def _holds(found: object, written: object) -> bool:
    """Whether `found` holds everything `written` does (and maybe defaults beside)."""
    if isinstance(written, dict):
        return isinstance(found, dict) and all(_holds(found.get(k), v) for k, v in written.items())
    if isinstance(written, list):
        return (
            isinstance(found, list)
            and len(found) == len(written)
            and all(_holds(f, w) for f, w in zip(found, written, strict=True))
        )
    return found == written


async def _migrated(
    server: ApiServer, kubeconfig: Path, webhook: LoopbackWebhook, certs: Path, version: str
) -> None:
    """The controller of every namespace, under the manifests' RBAC and serving the
    conversion, until every CRD stores `version` alone."""
    async with running_controller(
        server,
        NS,
        every_namespace=True,  # the one controller that may trim
        kubeconfig=str(kubeconfig),
        webhook_addr=f"127.0.0.1:{webhook.port}",
        webhook_cert_dir=str(certs),
    ):

        async def trimmed() -> bool:
            return set(map(tuple, _stored(server).values())) == {(version,)}

        await eventually(trimmed, within=60, what=f"every CRD's storedVersions {version}")
