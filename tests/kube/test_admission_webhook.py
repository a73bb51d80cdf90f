"""The admission webhooks on the real API server, which calls the controller over TLS.

The controller serves them on loopback with a self-signed certificate, and the webhook
configurations of manifests/webhook/ are registered as the local cluster registers them
(controller/dev/install.py: a URL and the certificate as caBundle), narrowed to the
test's namespace so that the session's other tests are not reviewed.

Shown here: a reserved variable and a bad image reference refused by the webhook (the
CRD's schema accepts both); a template spec change refused (the CRD's CEL rule answers
first in the API server, so the webhook's own refusal is shown by a review sent to it);
an approval records the approver (a user the admin impersonates); naming another
approver is refused; with no replica answering, creates and spec changes are refused
(failurePolicy Fail) and metadata-only writes still pass (matchConditions); an object
stored with a bad spec while no webhook was registered waits InvalidSpec with no Job."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controller.dev.install import WEBHOOK_CONFIGURATIONS, LoopbackWebhook, free_port, path_of
from controller.dev.kustomize import render
from controller.io.admission import Webhooks
from runtime.envtest import ApiServer, RequestFailed
from runtime.envtest.client import admin_ssl_context
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import MERGE, Kube, condition_is, eventually, running_controller
from tests.paths import REPO

pytestmark = pytest.mark.kube
MANIFESTS = REPO / "manifests"
GROUP_VERSION = "infrastructure.cluster.x-k8s.io/v1beta1"
PLANS_CRD = "terraformplans.infrastructure.cluster.x-k8s.io"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _configurations(webhook: LoopbackWebhook, namespace: str) -> list[Json]:
    """The manifests' webhook configurations as the local cluster registers them, named
    for the test and reviewing only its namespace."""
    found = []
    for obj in render(MANIFESTS):
        if obj["kind"] not in WEBHOOK_CONFIGURATIONS:
            continue
        fitted = webhook.configuration(obj)
        fitted["metadata"]["name"] = f"{obj['metadata']['name']}-{namespace}"[:253]
        for hook in fitted["webhooks"]:
            selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            hook["namespaceSelector"] = selector
        found.append(fitted)
    return found


@contextlib.asynccontextmanager
async def registered(server: ApiServer, configurations: list[Json]) -> AsyncIterator[None]:
    for obj in configurations:
        await asyncio.to_thread(server.request, "POST", path_of(obj), obj)
    try:
        yield
    finally:
        for obj in configurations:
            with contextlib.suppress(RequestFailed):
                await asyncio.to_thread(server.request, "DELETE", path_of(obj, named=True))


@contextlib.asynccontextmanager
async def serving(
    server: ApiServer, namespace: str, tmp_path: Path
) -> AsyncIterator[LoopbackWebhook]:
    """The controller with its webhooks on a loopback port, until the block ends."""
    webhook = LoopbackWebhook.make(free_port())
    (tmp_path / "tls.crt").write_bytes(webhook.cert)
    (tmp_path / "tls.key").write_bytes(webhook.key)
    async with running_controller(
        server,
        namespace,
        webhook_addr=f"127.0.0.1:{webhook.port}",
        webhook_cert_dir=str(tmp_path),
    ):
        yield webhook


def _cluster(name: str, **spec: Any) -> Json:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "TerraformCluster",
        "metadata": {"name": name},
        "spec": {
            "source": {"configMapRef": {"name": f"{name}-module"}},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"},
        }
        | spec,
    }


async def _refusal(
    kube: Kube, method: str, path: str, body: Json, ctype: str = "application/json"
) -> str:
    with pytest.raises(RequestFailed) as refused:
        await kube.call(method, path, body, ctype)
    return str(refused.value)


async def _in_effect(kube: Kube) -> None:
    """The API server reads webhook configurations from a watch: wait until they apply."""

    async def probe() -> bool:
        try:
            body = _cluster("probe", variables={"captf_probe": 1})
            await kube.call("POST", kube.captf_path("terraformclusters") + "?dryRun=All", body)
        except RequestFailed as error:
            return "denied the request" in str(error)
        return False

    await eventually(probe, what="the webhooks in effect")


async def test_the_webhook_refuses_what_the_schema_lets_through(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    async with (
        serving(apiserver, namespace, tmp_path) as webhook,
        registered(apiserver, _configurations(webhook, namespace)),
    ):
        await _in_effect(kube)
        clusters = kube.captf_path("terraformclusters")
        reserved = await _refusal(
            kube,
            "POST",
            clusters,
            _cluster("c1", variables={"captf_tags": {"a": "b"}, "size": 1}),
        )
        assert "denied the request" in reserved
        assert "spec.variables.captf_tags" in reserved
        assert "size" not in reserved
        bad = await _refusal(
            kube, "POST", clusters, _cluster("c2", source={"image": "Registry/Team Mod:v1"})
        )
        assert "spec.source.image" in bad
        assert "Team Mod" not in bad  # the rule, never the value
        # What passes the checks is stored; a spec change is reviewed again.
        await kube.call("POST", clusters, _cluster("c3", variables={"size": 1}))
        changed = {"spec": {"variables": {"size": 1, "count": 2}}}
        again = await _refusal(
            kube, "PATCH", kube.captf_path("terraformclusters", "c3"), changed, MERGE
        )
        assert "spec.variables.count" in again
        assert await kube.jobs() == []


def _policy(name: str, expression: str) -> Json:
    rule = {"name": "r", "action": "Deny", "expression": expression, "message": "m"}
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "TerraformPolicy",
        "metadata": {"name": name},
        "spec": {"rules": [rule]},
    }


async def test_a_policy_that_does_not_compile_or_costs_too_much_is_refused_with_its_position(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    policies = f"/apis/{GROUP_VERSION}/terraformpolicies"
    name = f"p-{namespace}"[:63]
    async with (
        serving(apiserver, namespace, tmp_path) as webhook,
        registered(apiserver, _configurations(webhook, namespace)),
    ):
        await _in_effect(kube)
        malformed = await _refusal(kube, "POST", policies, _policy(name, "resource.type =="))
        assert f"TerraformPolicy {name}: spec.rules[0].expression: 1:17: Syntax error" in malformed
        costly = "resource.x.all(a, resource.x.all(b, resource.x.all(c, a != c)))"
        refused = await _refusal(kube, "POST", policies, _policy(name, costly))
        assert "spec.rules[0].expression: 1:51: too costly" in refused
        # A good one is stored; an edit that breaks it is reviewed and refused.
        await kube.call("POST", policies, _policy(name, "resource.type == 'aws_db_instance'"))
        try:
            broken = {"spec": {"rules": [_policy(name, "resource.type")["spec"]["rules"][0]]}}
            edit = await _refusal(kube, "PATCH", f"{policies}/{name}", broken, MERGE)
            assert "is of type dyn, not bool" in edit
        finally:
            await kube.call("DELETE", f"{policies}/{name}")


async def test_a_template_spec_change_is_refused(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    template = {
        "apiVersion": GROUP_VERSION,
        "kind": "TerraformMachineTemplate",
        "metadata": {"name": "t1"},
        "spec": {"template": {"spec": _cluster("x", variables={"size": 1})["spec"]}},
    }
    async with (
        serving(apiserver, namespace, tmp_path) as webhook,
        registered(apiserver, _configurations(webhook, namespace)),
    ):
        await _in_effect(kube)
        path = kube.captf_path("terraformmachinetemplates")
        stored = await kube.call("POST", path, template)
        change = {"spec": {"template": {"spec": {"variables": {"size": 2}}}}}
        refused = await _refusal(kube, "PATCH", f"{path}/t1", change, MERGE)
        assert "TerraformMachineTemplate spec.template is immutable" in refused
        # Cluster API's topology controller compares by a dry run it annotates: that
        # passes (it then rotates the template), and stores nothing.
        note = {"annotations": {"topology.cluster.x-k8s.io/dry-run": ""}}
        dry = await kube.call("PATCH", f"{path}/t1?dryRun=All", change | {"metadata": note}, MERGE)
        assert dry["spec"]["template"]["spec"]["variables"] == {"size": 2}
        # Without the annotation a dry run is refused like the real thing.
        assert "spec.template is immutable" in await _refusal(
            kube, "PATCH", f"{path}/t1?dryRun=All", change, MERGE
        )
        live = await kube.call("GET", f"{path}/t1")
        assert live["spec"]["template"]["spec"]["variables"] == {"size": 1}
        new = json.loads(json.dumps(stored))
        new["spec"]["template"]["spec"]["variables"] = {"size": 2}
        review = _review("TerraformMachineTemplate", "UPDATE", new, old=stored)
        response = await asyncio.to_thread(_send, webhook, "/validate", review)
        assert response["allowed"] is False
        assert "spec.template is immutable" in response["status"]["message"]
        # Labels may change: not a spec change, and not sent to the webhook at all.
        labelled = {"metadata": {"labels": {"team": "a"}}}
        await kube.call("PATCH", f"{path}/t1", labelled, MERGE)


async def test_approving_records_the_approver_and_no_one_else(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    kube = Kube(apiserver, namespace)
    await _plans_crd(apiserver)
    await _may_approve(kube, "alice")
    plans = kube.captf_path("terraformplans")
    async with (
        serving(apiserver, namespace, tmp_path) as webhook,
        registered(apiserver, _configurations(webhook, namespace)),
    ):
        await _in_effect(kube)
        await kube.call("POST", plans, _plan("p1"))
        await kube.call("POST", plans, _plan("p2"))
        approve = {"spec": {"approved": True}}
        approved = await asyncio.to_thread(
            _as_user, apiserver, "alice", "PATCH", f"{plans}/p1", approve
        )
        assert approved["spec"]["approvedBy"] == "alice"
        # The admin (a different user) cannot rewrite the record ...
        rewrite = {"spec": {"approvedBy": "mallory"}}
        refused = await _refusal(kube, "PATCH", f"{plans}/p1", rewrite, MERGE)
        assert "spec.approvedBy" in refused
        # ... and alice cannot approve in bob's name.
        as_bob = {"spec": {"approved": True, "approvedBy": "bob"}}
        with pytest.raises(urllib.error.HTTPError) as named:
            await asyncio.to_thread(_as_user, apiserver, "alice", "PATCH", f"{plans}/p2", as_bob)
        assert "spec.approvedBy" in named.value.read().decode()
        assert "approvedBy" not in (await kube.get("terraformplans", "p2"))["spec"]


async def test_with_no_replica_answering_the_failure_policy_holds(
    apiserver: ApiServer, namespace: str, tmp_path: Path
) -> None:
    """failurePolicy Fail behind matchConditions: creates and spec changes are refused,
    writes that leave the spec alone (Cluster API's, the controller's) pass."""
    kube = Kube(apiserver, namespace)
    await _plans_crd(apiserver)
    clusters, plans = kube.captf_path("terraformclusters"), kube.captf_path("terraformplans")
    await kube.call("POST", clusters, _cluster("c1", variables={"size": 1}))
    await kube.call("POST", plans, _plan("p1"))
    webhook = LoopbackWebhook.make(free_port())  # registered, never served
    async with registered(apiserver, _configurations(webhook, namespace)):

        async def refused_for_the_webhook() -> bool:
            try:
                await kube.call("POST", clusters + "?dryRun=All", _cluster("c2"))
            except RequestFailed as error:
                return "failed calling webhook" in str(error)
            return False

        await eventually(refused_for_the_webhook, what="creates refused for want of the webhook")
        approval = await _refusal(kube, "PATCH", f"{plans}/p1", {"spec": {"approved": True}}, MERGE)
        assert "failed calling webhook" in approval
        change = {"spec": {"variables": {"size": 2}}}
        assert "failed calling webhook" in await _refusal(
            kube, "PATCH", f"{clusters}/c1", change, MERGE
        )
        # Metadata only: never sent to the webhook, so it passes.
        await kube.call("PATCH", f"{clusters}/c1", {"metadata": {"labels": {"a": "b"}}}, MERGE)
        await kube.call(
            "PATCH", f"{plans}/p1", {"metadata": {"finalizers": ["x.example/keep"]}}, MERGE
        )
        await kube.call("PATCH", f"{plans}/p1", {"metadata": {"finalizers": None}}, MERGE)
        assert (
            "approved" not in (await kube.get("terraformplans", "p1"))["spec"]
            or not (await kube.get("terraformplans", "p1"))["spec"]["approved"]
        )


async def test_a_bad_spec_stored_without_the_webhook_runs_nothing(
    apiserver: ApiServer, namespace: str
) -> None:
    """No webhook registered (absent, or installed after the object): the controller
    makes the same checks and the object waits InvalidSpec, with no Job."""
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster(variables={"size": 1, "captf_cluster": {"name": "x"}})
    async with running_controller(apiserver, namespace):
        ready = await condition_is(kube, "Ready", "False", "InvalidSpec")
        assert "spec.variables.captf_cluster" in ready["message"]
        assert await kube.jobs() == []


async def test_naming_a_secret_needs_the_right_to_read_it(
    apiserver: ApiServer, namespace: str
) -> None:
    """The SubjectAccessReview the webhook asks, answered by the real API server's RBAC.
    The reviews are sent as the API server sends them once `spec.identityRef` and
    TerraformClusterIdentity are in the schema (they are being added beside this)."""
    kube = Kube(apiserver, namespace)
    await kube.call(
        "POST", f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "creds"}}
    )
    await _may_get_secret(kube, "carol", "creds")
    uses = _cluster("c1") | {"spec": {"identityRef": {"kind": "Secret", "name": "creds"}}}
    uses["metadata"]["namespace"] = namespace
    identity: Json = {
        "apiVersion": GROUP_VERSION,
        "kind": "TerraformClusterIdentity",
        "metadata": {"name": f"id-{namespace}"},
        "spec": {"secretRef": {"namespace": namespace, "name": "creds"}},
    }
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        hooks = Webhooks(transport)
        for obj, field in ((uses, "spec.identityRef"), (identity, "spec.secretRef")):
            allowed = await hooks.validate(
                _review(obj["kind"], "CREATE", obj, user="carol")["request"]
            )
            assert allowed.allowed, allowed.message
            refused = await hooks.validate(
                _review(obj["kind"], "CREATE", obj, user="dave")["request"]
            )
            assert not refused.allowed
            assert f"{field}: names a Secret the requester may not get" in refused.message
        # An object that names a cluster identity is not asked to read its Secret.
        shared = _cluster("c2") | {
            "spec": {"identityRef": {"kind": "TerraformClusterIdentity", "name": "x"}}
        }
        named = await hooks.validate(
            _review("TerraformCluster", "CREATE", shared, user="dave")["request"]
        )
        assert named.allowed


async def test_deleting_an_identity_in_use_is_refused_with_its_users(
    apiserver: ApiServer, namespace: str
) -> None:
    """The DELETE review lists the objects from the real API server: refused while a
    TerraformCluster names the identity (saying which), allowed once it is gone. An
    identity of the same name prefix that nobody names is allowed at once."""
    kube = Kube(apiserver, namespace)
    name = f"id-{namespace}"
    clusters = kube.captf_path("terraformclusters")
    user = _cluster("c1")
    user["spec"]["identityRef"] = {"name": name}
    await kube.call("POST", clusters, user)
    identity: Json = {
        "apiVersion": GROUP_VERSION,
        "kind": "TerraformClusterIdentity",
        "metadata": {"name": name},
    }
    unused = identity | {"metadata": {"name": f"{name}-unused"}}
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        hooks = Webhooks(transport)

        async def delete(obj: Json) -> Any:
            review = _review("TerraformClusterIdentity", "DELETE", {}, old=obj)
            return await hooks.validate(review["request"])

        refused = await delete(identity)
        assert not refused.allowed
        assert f"in use by TerraformCluster {namespace}/c1" in refused.message
        assert (await delete(unused)).allowed
        await kube.call("DELETE", f"{clusters}/c1")

        async def gone() -> bool:
            return bool((await delete(identity)).allowed)

        await eventually(gone, what="the deletion allowed once no object names it")


# -- helpers ----------------------------------------------------------------------------


def _plan(name: str) -> Json:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "TerraformPlan",
        "metadata": {"name": name},
        "spec": {
            "target": {"kind": "TerraformCluster", "name": "c1", "uid": "u1"},
            "approved": False,
        },
    }


async def _plans_crd(server: ApiServer) -> None:
    """TerraformPlan's CRD; a stand-in that takes any spec when the session has none yet
    (the kind is being added beside this webhook)."""
    try:
        await asyncio.to_thread(server.request, "GET", f"{CRDS}/{PLANS_CRD}")
        return
    except RequestFailed as error:
        if error.status != 404:
            raise
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": PLANS_CRD},
        "spec": {
            "group": "infrastructure.cluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {
                "kind": "TerraformPlan",
                "plural": "terraformplans",
                "singular": "terraformplan",
                "listKind": "TerraformPlanList",
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    with contextlib.suppress(RequestFailed):
        await asyncio.to_thread(server.request, "POST", CRDS, crd)

    async def served() -> bool:
        try:
            await asyncio.to_thread(
                server.request,
                "GET",
                "/apis/infrastructure.cluster.x-k8s.io/v1beta1/terraformplans",
            )
        except RequestFailed:
            return False
        return True

    await eventually(served, what="the TerraformPlan kind served")


async def _may_approve(kube: Kube, user: str) -> None:
    """`user` may read and update the namespace's plans (and nothing else)."""
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{kube.ns}"
    role = {
        "metadata": {"name": "approver"},
        "rules": [
            {
                "apiGroups": ["infrastructure.cluster.x-k8s.io"],
                "resources": ["terraformplans"],
                "verbs": ["get", "patch", "update"],
            }
        ],
    }
    binding = {
        "metadata": {"name": "approver"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "approver"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    await kube.call("POST", f"{rbac}/roles", role)
    await kube.call("POST", f"{rbac}/rolebindings", binding)


async def _may_get_secret(kube: Kube, user: str, name: str) -> None:
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{kube.ns}"
    rule = {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [name], "verbs": ["get"]}
    role = {"metadata": {"name": f"read-{name}"}, "rules": [rule]}
    binding = {
        "metadata": {"name": f"read-{name}"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": f"read-{name}",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    await kube.call("POST", f"{rbac}/roles", role)
    await kube.call("POST", f"{rbac}/rolebindings", binding)


def _as_user(server: ApiServer, user: str, method: str, path: str, body: Json) -> Json:
    """A merge patch (or other call) as `user`: the admin impersonates them."""
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": MERGE, "Impersonate-User": user},
    )
    with urllib.request.urlopen(request, context=admin_ssl_context(server.pki), timeout=30) as resp:
        answer: Json = json.loads(resp.read())
        return answer


def _review(
    kind: str, operation: str, obj: Json, old: Json | None = None, user: str = "someone"
) -> Json:
    request: Json = {
        "uid": "u-1",
        "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1alpha1", "kind": kind},
        "operation": operation,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _send(webhook: LoopbackWebhook, path: str, review: Json) -> Json:
    """An AdmissionReview to the webhook, trusting its certificate as the API server does."""
    context = ssl.create_default_context(cadata=webhook.cert.decode())
    request = urllib.request.Request(
        webhook.url(path),
        data=json.dumps(review).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        answer: Json = json.loads(resp.read())["response"]
        return answer
