"""Least privilege, measured: the controller runs with only the manifests' RBAC (a
TokenRequest token for its ServiceAccount, no admin) through apply, re-apply, a Job
deleted while it ran, pruning, a pool beside its cluster, leader election and deletion
(its result read from the pod's termination message); the API server's audit log then
shows every request it made. None may be refused (403), and every verb the manifests
grant must have been used."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import orjson
import pytest
import yaml

from controller.core.basics.names import GROUP
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer, RequestFailed
from runtime.envtest.process import free_ports
from runtime.jsonobj import Json
from tests.kube.harness import (
    MERGE,
    Kube,
    approve_plan,
    condition_is,
    create_pool,
    eventually,
    new_job,
    nth_job,
    plan_is,
    running_controller,
    succeed_apply,
    write_plan,
)
from tests.kube.test_controller_autoscaling import autoscaling_flow
from tests.kube.test_controller_remediation import remediation_flow

pytestmark = pytest.mark.kube
TEMPLATES = {
    "terraformmachinetemplates": "TerraformMachineTemplate",
    "terraformmachinepooltemplates": "TerraformMachinePoolTemplate",
}
MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
CLUSTERS = "terraformclusters"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
# Checked by admission (OwnerReferencesPermissionEnforcement, when a cluster enables it)
# as a permission, never sent as a request: no audit entry can show it used.
NOT_REQUESTS = {(GROUP, "<captf kind>/finalizers", "update")}
SUMMARY = {"fingerprint": "sha256:0a", "counts": {"replace": 1}, "resources": []}


# Checked by the RBAC escalation rules when the controller creates the runner's
# RoleBinding: a permission, not a request (the RoleBinding's creation shows it held).
NOT_REQUESTS |= {("rbac.authorization.k8s.io", "clusterroles", "bind")}
# The storage version migration's, run only by a controller of every namespace (this one
# watches its own): tests/kube/test_storage_migration.py runs it under these same rules
# and audits it.
MIGRATION_ONLY = {
    ("apiextensions.k8s.io", "customresourcedefinitions", "get"),
    ("apiextensions.k8s.io", "customresourcedefinitions/status", "patch"),
    (GROUP, "terraformclustertemplates", "list"),
    (GROUP, "terraformclustertemplates", "patch"),
    (GROUP, "terraformpolicies", "patch"),
}


async def _legacy_runner_rbac(kube: Kube) -> None:
    """The runner's identity as it was applied by hand before the controller provided it:
    an unlabelled ServiceAccount, a Role, and a RoleBinding to that Role. The controller
    takes the account and the binding over (nothing for the runner is created here on
    the controller's behalf: it must do that under its own RBAC)."""
    ns = kube.ns
    await kube.call(
        "POST", f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "captf-runner"}}
    )
    role = {
        "metadata": {"name": "captf-runner"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
    }
    await kube.call("POST", f"{RBAC}/namespaces/{ns}/roles", role)
    binding = {
        "metadata": {"name": "captf-runner"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "captf-runner",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "captf-runner", "namespace": ns}],
    }
    await kube.call("POST", f"{RBAC}/namespaces/{ns}/rolebindings", binding)


async def _runner_rbac(kube: Kube) -> tuple[Json | None, Json | None]:
    """The namespace's captf-runner ServiceAccount and RoleBinding, or None for each gone."""
    found: list[Json | None] = []
    for path in (
        f"/api/v1/namespaces/{kube.ns}/serviceaccounts/captf-runner",
        f"{RBAC}/namespaces/{kube.ns}/rolebindings/captf-runner",
    ):
        try:
            found.append(await kube.call("GET", path))
        except RequestFailed as err:
            if err.status != 404:
                raise
            found.append(None)
    return found[0], found[1]


def _docs(namespace: str) -> list[Json]:
    """rbac.yaml moved into `namespace` (the controller's and the objects' namespace here),
    cluster-scoped names made unique to the test."""
    docs = [d for d in yaml.safe_load_all((MANIFESTS / "rbac.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"].startswith("Cluster"):
            doc["metadata"]["name"] += f"-{namespace}"
        else:
            doc["metadata"]["namespace"] = namespace
        if doc.get("roleRef", {}).get("kind") == "ClusterRole":
            doc["roleRef"]["name"] += f"-{namespace}"
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
    return docs


def _path(doc: Json, namespace: str) -> str:
    plural = {
        "ServiceAccount": f"/api/v1/namespaces/{namespace}/serviceaccounts",
        "ClusterRole": f"{RBAC}/clusterroles",
        "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
        "Role": f"{RBAC}/namespaces/{namespace}/roles",
        "RoleBinding": f"{RBAC}/namespaces/{namespace}/rolebindings",
    }
    return plural[doc["kind"]]


# One code path serves the three CAPTF kinds: a verb used on one is used on all.
_KINDS = ("terraformclusters", "terraformmachinepools", "terraformmachines")


def _kind(resource: str) -> str:
    plural, slash, sub = resource.partition("/")
    return f"<captf kind>{slash}{sub}" if plural in _KINDS else resource


def _granted(docs: list[Json]) -> set[tuple[str, str, str]]:
    return {
        (group, _kind(resource), verb)
        for doc in docs
        if doc["kind"] in ("ClusterRole", "Role")
        for rule in doc["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


async def _token(kube: Kube, account: str) -> str:
    request = {"spec": {"expirationSeconds": 3600}}
    answer = await kube.call(
        "POST", f"/api/v1/namespaces/{kube.ns}/serviceaccounts/{account}/token", request
    )
    return str(answer["status"]["token"])


async def _token_kubeconfig(kube: Kube, server: ApiServer, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount with a TokenRequest token."""
    token = await _token(kube, account)
    ca = base64.b64encode(server.pki.ca_cert.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "t", "cluster": {"server": server.url, "certificate-authority-data": ca}}
        ],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": account}}],
        "current-context": "t",
    }
    await asyncio.to_thread(path.write_text, yaml.safe_dump(config))
    return path


def _requests(audit_log: Path, user: str) -> list[Json]:
    entries = []
    for line in audit_log.read_bytes().splitlines():
        entry = orjson.loads(line)
        if entry.get("user", {}).get("username") == user and entry.get("objectRef"):
            entries.append(entry)
    return entries


def _used(entries: list[Json]) -> set[tuple[str, str, str]]:
    used = set()
    for entry in entries:
        ref = entry["objectRef"]
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup", ""), _kind(resource), entry["verb"]))
        if entry["verb"] == "watch":
            # A cache starts with a streaming list (a watch); on an API server that
            # refuses those, the same code lists in pages instead: list goes with watch.
            used.add((ref.get("apiGroup", ""), _kind(resource), "list"))
    return used


async def _metrics_reader(kube: Kube) -> str:
    """A token of a ServiceAccount bound to captf-metrics-reader (Prometheus, say), and an
    unbound account `nobody`."""
    [reader] = [
        d
        for d in yaml.safe_load_all((MANIFESTS / "user-roles.yaml").read_text())
        if d and d["metadata"]["name"] == "captf-metrics-reader"
    ]
    reader["metadata"]["name"] += f"-{kube.ns}"
    await kube.call("POST", f"{RBAC}/clusterroles", reader)
    for account in ("prometheus", "nobody"):
        await kube.call(
            "POST", f"/api/v1/namespaces/{kube.ns}/serviceaccounts", {"metadata": {"name": account}}
        )
    binding = {
        "metadata": {"name": reader["metadata"]["name"]},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": reader["metadata"]["name"],
        },
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": kube.ns}],
    }
    await kube.call("POST", f"{RBAC}/clusterrolebindings", binding)
    return await _token(kube, "prometheus")


async def _scrape(port: int, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    url = f"https://127.0.0.1:{port}/metrics"

    async def answered() -> int | None:
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(url, headers=headers, ssl=False) as answer,
            ):
                return answer.status
        except aiohttp.ClientConnectionError:
            return None  # not listening yet

    return await eventually(answered, within=60.0, what=f"an answer from {url}")


async def _identity_flow(kube: Kube) -> None:
    """An identity allowing this namespace: its Secret copied here (create), the identity
    held by its finalizer (patch) and its status written; then taken off the list, the
    copy is deleted (delete)."""
    secrets = f"/api/v1/namespaces/{kube.ns}/secrets"
    await kube.call("POST", secrets, {"metadata": {"name": "aws"}, "stringData": {"K": "v"}})
    name = f"audit-{kube.ns}"[:60]
    identity = {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "TerraformClusterIdentity",
        "metadata": {"name": name},
        "spec": {
            "secretRef": {"namespace": kube.ns, "name": "aws"},
            "allowedNamespaces": {"list": [kube.ns]},
        },
    }
    path = f"/apis/{GROUP}/v1beta1/terraformclusteridentities"
    await kube.call("POST", path, identity)
    ref = {"kind": "TerraformClusterIdentity", "name": name}
    await kube.setup_cluster("c2", identityRef=ref)

    async def mirror(present: bool) -> bool:
        found = await kube.call("GET", f"{secrets}?labelSelector=captf.io/identity-mirror")
        return bool(found["items"]) == present

    async def held() -> bool:
        found = await kube.call("GET", f"{path}/{name}")
        status = found.get("status") or {}
        return "captf.io/identity-in-use" in found["metadata"].get("finalizers", []) and bool(
            status.get("namespaces")
        )

    await eventually(lambda: mirror(True), what="the identity's copy")
    await eventually(held, what="the identity held, its status written")
    patch: Json = {"spec": {"allowedNamespaces": {"list": []}}}
    await kube.call("PATCH", f"{path}/{name}", patch, MERGE)
    await eventually(lambda: mirror(False), what="the copy deleted")


async def _template_flow(kube: Kube) -> None:
    """A machine and a pool template sized by their spec (no image: no lookup): each
    watched and its scale-from-zero status written."""
    for plural, kind in TEMPLATES.items():
        body = {
            "apiVersion": f"{GROUP}/v1beta1",
            "kind": kind,
            "metadata": {"name": "sized"},
            "spec": {
                "capacity": {"cpu": "2"},
                "template": {
                    "spec": {
                        "source": {"configMapRef": {"name": "module"}},
                        "jobs": {"image": "runner:1"},
                    }
                },
            },
        }
        await kube.call("POST", kube.captf_path(plural), body)

        async def sized(plural: str = plural) -> bool:
            found = await kube.get(plural, "sized")
            return (found.get("status") or {}).get("capacity") == {"cpu": "2"}

        await eventually(sized, what=f"{plural} status.capacity")


async def test_the_manifests_rbac_is_exactly_what_the_flows_use(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    docs = _docs(namespace)
    for doc in docs:
        await kube.call("POST", _path(doc, namespace), doc)
    kubeconfig = await _token_kubeconfig(kube, apiserver, "captf-controller", tmp_path / "kc")
    scraper = await _metrics_reader(kube)
    await _legacy_runner_rbac(kube)
    await kube.setup_cluster(jobs={"successfulJobsHistoryLimit": 1})
    clock = SteppedClock()
    [metrics_port] = free_ports(1)
    async with running_controller(
        apiserver,
        namespace,
        clock=clock,
        kubeconfig=str(kubeconfig),
        leader_elect=True,
        controller_namespace=namespace,
        metrics_secure=True,
        metrics_addr=f"127.0.0.1:{metrics_port}",
        metrics_cert_dir=None,
        health_probe_addr="127.0.0.1:0",
        kept_plans=0,
    ):
        # A scrape: the controller reviews the scraper's token with the API server.
        assert await _scrape(metrics_port, scraper) == 200
        assert await _scrape(metrics_port, await _token(kube, "nobody")) == 403
        # The guard blocks the first apply. Before that first Job: the runner's account
        # taken over, its binding replaced by one to the runner's ClusterRole (which the
        # controller may bind, and no other).
        blocked = await nth_job(kube, 1)
        account, binding = await _runner_rbac(kube)
        assert account is not None
        assert binding is not None
        assert account["metadata"]["labels"]["captf.io/runner-rbac"] == "managed"
        assert binding["roleRef"]["kind"] == "ClusterRole"
        assert binding["roleRef"]["name"] == "captf-runner"
        assert blocked["spec"]["template"]["spec"]["serviceAccountName"] == "captf-runner"
        # Its TerraformPlan is made, approved, carried out, and (--kept-plans 0) pruned
        # once Applied.
        plan = blocked["metadata"]["name"]
        await write_plan(kube, plan, {"plan.json": "e30="}, summary=SUMMARY)
        await kube.finish(blocked, "blocked", at=clock.now(), result={"planSecret": plan})
        await plan_is(kube, plan, "Pending")
        await approve_plan(kube, plan)
        first = await new_job(kube, blocked)
        await succeed_apply(kube, first, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")

        async def plan_pruned() -> bool:
            found = await kube.call("GET", kube.captf_path("terraformplans"))
            return not found["items"]

        await eventually(plan_pruned, what="the applied TerraformPlan pruned")
        # A pool: its Job is recorded on the cluster's operation Lease and dropped again.
        await create_pool(kube)
        pool_job = await nth_job(kube, 1, "captf.io/name=p1")
        await succeed_apply(kube, pool_job, serial=1, at=clock.now(), name="p1")
        await condition_is(
            kube, "Ready", "True", "Applied", name="p1", plural="terraformmachinepools"
        )
        # A module image: its lookup reads the runner ServiceAccount's pull Secrets (no
        # registry listens there, so it waits without a Job).
        await kube.setup_cluster("img", files={}, source={"image": "127.0.0.1:1/none/module:1"})
        await condition_is(kube, "ImageResolved", "False", "RegistryUnavailable", name="img")
        # Never applied, it goes without a destroy (and leaves c1 the namespace's last).
        await kube.call("DELETE", kube.captf_path(CLUSTERS, "img"))

        async def img_gone() -> bool:
            names = (await kube.call("GET", kube.captf_path(CLUSTERS)))["items"]
            return all(o["metadata"]["name"] != "img" for o in names)

        await eventually(img_gone, what="the image cluster deleted")
        # A new input; its apply is deleted while it runs (read live, recorded on the
        # inputs Secret), then the next apply succeeds and the oldest success is pruned.
        patch = {"spec": {"variables": {"size": 2}}}
        await kube.call("PATCH", kube.captf_path(CLUSTERS, "c1"), patch, MERGE)
        second = await new_job(kube, blocked, first, selector="captf.io/name=c1,captf.io/op=apply")

        async def active() -> bool:
            status = (await kube.cluster()).get("status") or {}
            return bool(status.get("activeJob") == second["metadata"]["name"])

        # Deleted while the status names it: the controller must read both live.
        await eventually(active, what="the second apply active")
        await kube.delete_job(second["metadata"]["name"])
        third = await new_job(
            kube, blocked, first, second, selector="captf.io/name=c1,captf.io/op=apply"
        )
        await succeed_apply(kube, third, serial=2, at=clock.now())

        async def pruned() -> bool:
            names = {j["metadata"]["name"] for j in await kube.jobs("captf.io/name=c1")}
            return first["metadata"]["name"] not in names

        await eventually(pruned, what="the first apply pruned")
        # Deletion: destroy, then the finalizer comes off.
        await kube.call("DELETE", kube.captf_path("terraformmachinepools", "p1"))
        destroy = await nth_job(kube, 1, "captf.io/name=p1,captf.io/op=destroy")
        # Its result only in its pod's termination message: the controller lists the pod.
        done = '{"outcome":"succeeded","message":"destroyed"}'
        await kube.finish_in_pod(destroy, done, at=datetime.now(UTC), complete=True)

        async def gone() -> bool:
            found = await kube.call("GET", kube.captf_path("terraformmachinepools"))
            return not found["items"]

        await eventually(gone, what="the pool deleted")
        # The namespace's last object: once its destroy is done, the runner's RBAC goes.
        await kube.call("DELETE", kube.captf_path(CLUSTERS, "c1"))
        destroy = await nth_job(kube, 1, "captf.io/name=c1,captf.io/op=destroy")
        await kube.finish_in_pod(destroy, done, at=datetime.now(UTC), complete=True)

        async def runner_rbac_gone() -> bool:
            return await _runner_rbac(kube) == (None, None)

        await eventually(runner_rbac_gone, what="the runner's RBAC removed with the last object")
        await _identity_flow(kube)
        await _template_flow(kube)
        # A machine read unhealthy three times: its Machine marked for remediation (a
        # patch of machines), then unmarked.
        await kube.setup_cluster("c3")
        c3 = await nth_job(kube, 1, "captf.io/name=c3")
        await succeed_apply(kube, c3, serial=1, at=clock.now(), name="c3")
        await condition_is(kube, "Ready", "True", "Applied", name="c3")
        await remediation_flow(kube, clock, cluster="c3")
        # A pool whose cloud sizes its group: its replicas written to its MachinePool (a
        # patch of machinepools, guarded by resourceVersion).
        await autoscaling_flow(kube, clock, cluster="c3")

    entries = _requests(apiserver.audit_log, f"system:serviceaccount:{namespace}:captf-controller")
    refused = sorted(
        {
            (e["verb"], e["requestURI"])
            for e in entries
            if e.get("responseStatus", {}).get("code") == 403
        }
    )
    assert refused == []
    unused = _granted(docs) - _used(entries) - NOT_REQUESTS - MIGRATION_ONLY
    assert unused == set(), f"granted but never used: {sorted(unused)}"


def _allowed(kube: Kube, user: str, verb: str, resource: str, group: str = GROUP) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "resourceAttributes": {
                "namespace": kube.ns,
                "group": group,
                "resource": resource,
                "verb": verb,
            },
        },
    }
    return bool(
        kube.server.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)[
            "status"
        ].get("allowed")
    )


async def test_view_and_edit_roles_cover_captf_objects_and_no_secret(
    apiserver: ApiServer, namespace: str
) -> None:
    kube = Kube(apiserver, namespace)
    roles = [d for d in yaml.safe_load_all((MANIFESTS / "user-roles.yaml").read_text()) if d]
    for role in roles:
        name = role["metadata"]["name"]
        role["metadata"]["name"] = f"{name}-{namespace}"
        await kube.call("POST", f"{RBAC}/clusterroles", role)
        binding = {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{name}-{namespace}",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
        }
        await kube.call("POST", f"{RBAC}/namespaces/{namespace}/rolebindings", binding)
        labels = role["metadata"]["labels"]
        if name not in ("captf-metrics-reader", "captf-plan-approver", "captf-state-operator"):
            assert labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
        else:  # approving plans, or a state, is a role of its own, never part of edit
            assert not any(key.startswith("rbac.authorization.k8s.io/aggregate") for key in labels)
    try:
        for plural in _KINDS:
            assert _allowed(kube, "captf-view", "list", plural)
            assert not _allowed(kube, "captf-view", "patch", plural)
            assert _allowed(kube, "captf-edit", "create", plural)
            assert _allowed(kube, "captf-edit", "patch", plural)
        for user in ("captf-view", "captf-edit"):
            assert not _allowed(kube, user, "get", "secrets", group="")
            assert not _allowed(kube, user, "update", "terraformclusters/status")
            # Plans are read through view (which aggregates into edit too), approved by
            # neither.
            for verb in ("create", "update", "patch", "delete"):
                assert not _allowed(kube, user, verb, "terraformplans")
        assert _allowed(kube, "captf-view", "list", "terraformplans")
        for verb in ("update", "patch"):
            assert _allowed(kube, "captf-plan-approver", verb, "terraformplans")
        assert not _allowed(kube, "captf-plan-approver", "patch", "terraformplans/status")
        assert not _allowed(kube, "captf-plan-approver", "create", "terraformplans")
        # The state operator reads and replaces Secrets (the state), changes no object.
        for verb in ("get", "list", "create", "update", "delete"):
            assert _allowed(kube, "captf-state-operator", verb, "secrets", group="")
        assert not _allowed(kube, "captf-state-operator", "patch", "terraformclusters")
    finally:
        for role in roles:
            await kube.call("DELETE", f"{RBAC}/clusterroles/{role['metadata']['name']}")
