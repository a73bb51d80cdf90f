"""The namespaced install (variants/namespaced): the controller watches only the
namespaces --namespaces names, one watch each, with Roles there and no ClusterRole of
its own; a namespace it does not watch is left alone, and nothing it does is refused."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import Kube, install_runner_role, nth_job, running_controller
from tests.kube.test_rbac_audit import _requests, _token_kubeconfig

pytestmark = pytest.mark.kube
REPO = Path(__file__).resolve().parents[2]
VARIANT = REPO / "variants" / "namespaced"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
REVIEWS = {"authentication.k8s.io", "authorization.k8s.io"}
# Cluster-scoped: no Role can grant them, and a controller given --namespaces watches
# none of them (identities need the cluster-wide install).
CLUSTER_SCOPED = {
    "terraformclusteridentities",
    "terraformclusteridentities/status",
    "terraformpolicies",
    "namespaces",
}
# The storage version migration's: it reads the CRDs, which a namespaced install may not,
# so such a controller leaves the migration to clusterctl or an operator.
MIGRATION = {
    "customresourcedefinitions",
    "customresourcedefinitions/status",
    "terraformclustertemplates",
}


def _docs(path: Path) -> list[Json]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _role() -> Json:
    [role, _] = [d for d in _docs(VARIANT / "rbac.yaml") if d["kind"] == "Role"]
    return role


def test_each_watched_namespaces_role_is_the_cluster_roles_rules_without_the_reviews() -> None:
    """The two files cannot drift apart: what the controller may do in a watched namespace
    is what the ClusterRole grants everywhere, less the cluster-scoped reviews, which
    stay in a ClusterRole of their own that holds nothing else, less the cluster-scoped
    kinds, which such a controller does not watch, and less the storage migration's."""
    [cluster_role] = [
        d for d in _docs(REPO / "manifests" / "rbac.yaml") if d["kind"] == "ClusterRole"
    ]
    namespaced = [
        r
        for r in cluster_role["rules"]
        if r["apiGroups"][0] not in REVIEWS
        and not set(r["resources"]) & (CLUSTER_SCOPED | MIGRATION)
    ]
    roles = [d for d in _docs(VARIANT / "rbac.yaml") if d["kind"] == "Role"]
    assert {r["metadata"]["namespace"] for r in roles} == {"team-a", "team-b"}
    for role in roles:
        assert role["rules"] == namespaced
    [reviews] = [d for d in _docs(VARIANT / "rbac.yaml") if d["kind"] == "ClusterRole"]
    assert {g for r in reviews["rules"] for g in r["apiGroups"]} == REVIEWS


def test_the_variant_renders_without_the_cluster_role_and_with_the_namespaces() -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    out = subprocess.run(
        [kubectl, "kustomize", str(VARIANT)], check=True, capture_output=True, text=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ClusterRole", "captf-controller") not in names
    assert ("ClusterRoleBinding", "captf-controller") not in names
    assert ("ClusterRole", "captf-runner") in names
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespaces=team-a,team-b" in args


async def _namespace(kube: Kube, name: str) -> None:
    await kube.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})


async def _grant(kube: Kube, namespace: str, account_ns: str) -> None:
    """The variant's Role and RoleBinding for the controller, in `namespace`."""
    role = _role()
    role["metadata"]["namespace"] = namespace
    await kube.call("POST", f"{RBAC}/namespaces/{namespace}/roles", role)
    binding = {
        "metadata": {"name": "captf-controller"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "captf-controller",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": "captf-controller", "namespace": account_ns}
        ],
    }
    await kube.call("POST", f"{RBAC}/namespaces/{namespace}/rolebindings", binding)


async def test_a_controller_with_roles_only_runs_its_namespaces_and_ignores_another(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    other, ignored = f"nsc-{secrets.token_hex(4)}", f"nsb-{secrets.token_hex(4)}"
    for name in (other, ignored):
        await _namespace(kube, name)
    await kube.call(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"metadata": {"name": "captf-controller"}},
    )
    # Roles in the two watched namespaces; the controller's Leases live in the first.
    for watched in (namespace, other):
        await _grant(kube, watched, namespace)
    await asyncio.to_thread(install_runner_role, apiserver)
    kubeconfig = await _token_kubeconfig(kube, apiserver, "captf-controller", tmp_path / "kc")
    teams = {ns: Kube(apiserver, ns) for ns in (namespace, other, ignored)}
    for team in teams.values():
        await team.setup_cluster()
    async with running_controller(
        apiserver,
        namespace,
        clock=SteppedClock(),
        kubeconfig=str(kubeconfig),
        namespaces=f"{namespace},{other}",
        controller_namespace=namespace,
    ):
        for watched in (namespace, other):
            job = await nth_job(teams[watched], 1)
            assert job["spec"]["template"]["spec"]["serviceAccountName"] == "captf-runner"
        # The runner's identity provided in each watched namespace, with Roles only.
        for watched in (namespace, other):
            path = f"/api/v1/namespaces/{watched}/serviceaccounts/captf-runner"
            assert (await kube.call("GET", path))["metadata"]["labels"]["captf.io/runner-rbac"]
    # The unwatched namespace: no Job, no status, no runner account.
    assert await teams[ignored].jobs() == []
    assert "status" not in await teams[ignored].cluster()
    accounts = await kube.call("GET", f"/api/v1/namespaces/{ignored}/serviceaccounts")
    assert all(a["metadata"]["name"] != "captf-runner" for a in accounts["items"])
    entries = _requests(apiserver.audit_log, f"system:serviceaccount:{namespace}:captf-controller")
    assert entries, "the controller made its requests with the token"
    refused = sorted(
        {
            (e["verb"], e["requestURI"])
            for e in entries
            if e.get("responseStatus", {}).get("code") == 403
        }
    )
    assert refused == []
    # Never a request across all namespaces: every one names a watched namespace.
    touched = {e["objectRef"].get("namespace") for e in entries}
    assert touched <= {namespace, other}
