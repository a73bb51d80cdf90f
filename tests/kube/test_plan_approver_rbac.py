"""Separation of duties, measured by the API server's RBAC alone (no admission webhook,
no controller): manifests/user-roles.yaml applied as a user installs it, the built-in
`edit` role aggregated by kube-controller-manager's aggregation controller.

  editor    bound to `edit` in the namespace: creates a TerraformCluster, reads its
            TerraformPlans, and cannot approve one (403 on spec.approved), nor make
            or change one (create, status)
  approver  bound to `edit` and captf-plan-approver: `captf approve` approves

Each is a ServiceAccount authenticated by a TokenRequest token, as a person's
credentials would be."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
import yaml

from controller.cli.main import main
from runtime.envtest import ApiServer, RequestFailed
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import MERGE, Kube, eventually
from tests.kube.test_rbac_audit import _token_kubeconfig

pytestmark = pytest.mark.kube
MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
GROUP = "infrastructure.cluster.x-k8s.io"


async def _user_roles(kube: Kube) -> dict[str, str]:
    """user-roles.yaml applied, each ClusterRole named apart for this test (its labels, and
    so its aggregation into view and edit, as written); the names given, by role."""
    names = {}
    for role in yaml.safe_load_all((MANIFESTS / "user-roles.yaml").read_text()):
        if not role:
            continue
        name = role["metadata"]["name"]
        role["metadata"]["name"] = names[name] = f"{name}-{kube.ns}"
        await kube.call("POST", f"{RBAC}/clusterroles", role)
    return names


async def _account(kube: Kube, name: str, *roles: str) -> None:
    """A ServiceAccount bound in the namespace to each ClusterRole of `roles`."""
    await kube.call(
        "POST", f"/api/v1/namespaces/{kube.ns}/serviceaccounts", {"metadata": {"name": name}}
    )
    for role in roles:
        binding = {
            "metadata": {"name": f"{name}-{role}"[:63]},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": kube.ns}],
        }
        await kube.call("POST", f"{RBAC}/namespaces/{kube.ns}/rolebindings", binding)


def _allowed(kube: Kube, account: str, verb: str, resource: str) -> bool:
    plural, _, sub = resource.partition("/")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{kube.ns}:{account}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{kube.ns}"],
            "resourceAttributes": {
                "namespace": kube.ns,
                "group": GROUP,
                "resource": plural,
                "subresource": sub,
                "verb": verb,
            },
        },
    }
    answer = kube.server.request(
        "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
    )
    return bool(answer["status"].get("allowed"))


async def _as(kubeconfig: Path, method: str, path: str, body: Json, ctype: str) -> Json:
    async with open_transport(str(kubeconfig)) as t:
        return await t.request(method, path, body=body, content_type=ctype)


async def _refused(kubeconfig: Path, method: str, path: str, body: Json, ctype: str) -> int:
    try:
        await _as(kubeconfig, method, path, body, ctype)
    except ApiError as err:
        return err.status
    return 200


def _plan(cluster: Json) -> Json:
    meta = cluster["metadata"]
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "TerraformPlan",
        "metadata": {
            "name": "c1-apply-00000001",
            "labels": {
                "captf.io/kind": "TerraformCluster",
                "captf.io/name": "c1",
                "captf.io/uid": meta["uid"],
            },
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1beta1",
                    "kind": "TerraformCluster",
                    "name": "c1",
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"target": {"kind": "TerraformCluster", "name": "c1", "uid": meta["uid"]}},
    }


async def _captf(server: ApiServer, ns: str, kubeconfig: Path, *argv: str) -> int:
    return await asyncio.to_thread(main, [*argv, "-n", ns, "--kubeconfig", str(kubeconfig)])


async def test_edit_creates_objects_but_only_the_approver_role_approves(
    cluster: ApiServer, cluster_namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = Kube(cluster, cluster_namespace)
    roles = await _user_roles(kube)
    try:
        await _account(kube, "editor", "edit")
        await _account(kube, "approver", "edit", roles["captf-plan-approver"])

        async def aggregated() -> bool:
            return _allowed(kube, "editor", "create", "terraformclusters")

        await eventually(aggregated, what="captf-edit aggregated into edit")
        editor = await _token_kubeconfig(kube, cluster, "editor", tmp_path / "editor")
        approver = await _token_kubeconfig(kube, cluster, "approver", tmp_path / "approver")

        # The editor makes the object (its module and owner made by the admin)...
        body = await _cluster_body(kube)
        made = await _as(
            editor, "POST", kube.captf_path("terraformclusters"), body, "application/json"
        )
        # ...the controller would make its plan (played here by the admin, status included).
        plans = kube.captf_path("terraformplans")
        plan_path = kube.captf_path("terraformplans", "c1-apply-00000001")
        assert await _refused(editor, "POST", plans, _plan(made), "application/json") == 403
        await kube.call("POST", plans, _plan(made))
        status = {
            "status": {
                "phase": "Pending",
                "inputsHash": "h",
                "fingerprint": "sha256:0a",
                "counts": {"create": 0, "update": 0, "replace": 1, "delete": 0},
            }
        }
        await kube.call("PATCH", f"{plan_path}/status", status, MERGE)

        # The editor reads it and cannot approve it, nor touch its status.
        seen = await _as(editor, "GET", plan_path, {}, "application/json")
        assert seen["status"]["phase"] == "Pending"
        approve = {"spec": {"approved": True}}
        assert await _refused(editor, "PATCH", plan_path, approve, MERGE) == 403
        assert await _refused(editor, "PATCH", f"{plan_path}/status", status, MERGE) == 403
        capsys.readouterr()
        assert await _captf(cluster, kube.ns, editor, "approve", "tfc/c1") == 1
        assert "forbidden" in capsys.readouterr().err.lower()
        assert (await kube.get("terraformplans", "c1-apply-00000001"))["spec"]["approved"] is False

        # The approver can.
        assert await _captf(cluster, kube.ns, approver, "approve", "tfc/c1") == 0
        out = capsys.readouterr().out
        assert out.startswith("TerraformCluster/c1: approved TerraformPlan c1-apply-00000001")
        assert (await kube.get("terraformplans", "c1-apply-00000001"))["spec"]["approved"] is True
        # Approving is all the role gives: not the object's status, not a plan's.
        assert not _allowed(kube, "approver", "patch", "terraformplans/status")
        assert not _allowed(kube, "approver", "create", "terraformplans")
    finally:
        for name in roles.values():
            with contextlib.suppress(RequestFailed):
                await kube.call("DELETE", f"{RBAC}/clusterroles/{name}")


async def _cluster_body(kube: Kube) -> Json:
    """What Kube.setup_cluster makes, without making it: the module, the owner Cluster."""
    await kube.call(
        "POST",
        f"/api/v1/namespaces/{kube.ns}/configmaps",
        {"metadata": {"name": "c1-module"}, "data": {"main.tf": ""}},
    )
    owner = await kube.capi_cluster("c1")
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "TerraformCluster",
        "metadata": {
            "name": "c1",
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": "c1",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "source": {"configMapRef": {"name": "c1-module"}},
            "variables": {"size": 1},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"},
        },
    }
