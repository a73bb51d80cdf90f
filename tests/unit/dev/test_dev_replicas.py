"""The timeline's lines about the controller's own replicas, and the install fitted to
the process node."""

from __future__ import annotations

import base64

import pytest

from controller.dev.install import (
    WEBHOOK_CONFIGURATIONS,
    WEBHOOK_SECRET,
    LoopbackWebhook,
    on_process_node,
    path_of,
)
from controller.dev.kustomize import render
from controller.dev.replicas import deployment_change, lease_change, pod_change, replica_of
from runtime.jsonobj import Json
from tests.paths import REPO

MANIFESTS = REPO / "manifests"


def _lease(holder: str | None, renewed: str, acquired: str = "2026-01-01T00:00:00.000000Z") -> Json:
    return {"spec": {"holderIdentity": holder, "renewTime": renewed, "acquireTime": acquired}}


T0 = "2026-01-01T00:00:10.000000Z"


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        (None, _lease("pod-a_1f2e", T0), "leader: pod-a"),
        # A renewal says nothing.
        (_lease("pod-a_1f2e", T0), _lease("pod-a_1f2e", "2026-01-01T00:00:12.000000Z"), None),
        (
            _lease("pod-a_1f2e", T0),
            _lease(None, "2026-01-01T00:00:11.000000Z"),
            "released by pod-a",
        ),
        (
            _lease(None, "2026-01-01T00:00:11.000000Z"),
            _lease("pod-b_99", T0, acquired="2026-01-01T00:00:11.150000Z"),
            "leader: pod-b (0.1s after the release)",
        ),
        (
            _lease("pod-a_1f2e", T0),
            _lease("pod-b_99", T0, acquired="2026-01-01T00:00:26.400000Z"),
            "leader: pod-b (pod-a stopped renewing 16.4s before)",
        ),
    ],
)
def test_lease_changes_name_the_leader_and_time_each_handover(
    old: Json | None, new: Json, line: str | None
) -> None:
    assert lease_change(old, new) == line


def test_a_replica_is_the_identity_without_its_random_suffix() -> None:
    assert replica_of("captf-controller-5d9c-x7k2p_0a1b2c3d") == "captf-controller-5d9c-x7k2p"
    assert replica_of(None) is None


def _pod(ready: bool, deleting: bool = False) -> Json:
    meta: Json = {"name": "p", **({"deletionTimestamp": T0} if deleting else {})}
    return {
        "metadata": meta,
        "spec": {"containers": [{"ports": [{"name": "metrics", "containerPort": 4242}]}]},
        "status": {
            "podIP": "127.0.0.7",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        (_pod(False), _pod(True), "Ready; metrics at http://127.0.0.7:4242/metrics"),
        (None, _pod(True), "Ready; metrics at http://127.0.0.7:4242/metrics"),
        (_pod(True), _pod(True), None),
        (_pod(True), _pod(False), "not Ready"),
        (_pod(True), _pod(True, deleting=True), "stopping (SIGTERM)"),
        (_pod(True, deleting=True), None, "deleted"),
    ],
)
def test_pod_changes(old: Json | None, new: Json | None, line: str | None) -> None:
    assert pod_change(old, new) == line


def test_deployment_lines_follow_the_ready_count() -> None:
    def d(ready: int) -> Json:
        return {"spec": {"replicas": 2}, "status": {"readyReplicas": ready} if ready else {}}

    assert deployment_change(None, d(0)) == "0/2 Ready"
    assert deployment_change(d(0), d(1)) == "1/2 Ready"
    assert deployment_change(d(2), d(2)) is None


def test_the_install_on_the_process_node_binds_the_pod_ip_on_the_chosen_port() -> None:
    objects = render(MANIFESTS)
    fitted = on_process_node(objects, metrics_port=4242, time_scale=30)
    [deployment] = [o for o in fitted if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][-3:] == [
        "--metrics-addr=$(POD_IP):4242",
        "--time-scale=30",
        "--log-format=text",
    ]
    assert sum(a.startswith("--metrics-addr") for a in container["args"]) == 1
    # Plain HTTP there: no TLS, the probes on the metrics port.
    assert not any(a.startswith(("--metrics-secure", "--health-probe")) for a in container["args"])
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in (
        container["env"]
    )
    assert container["ports"] == [{"name": "metrics", "containerPort": 4242, "protocol": "TCP"}]
    # Every probe names a port the container declares (the node looks it up).
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "metrics"
    # Nothing else changes but the webhooks, left out without a LoopbackWebhook, and the
    # input is left as it was.
    webhook_kinds = {"Service", "Issuer", "Certificate", *WEBHOOK_CONFIGURATIONS}
    assert [o for o in fitted if o["kind"] != "Deployment"] == [
        o for o in objects if o["kind"] not in {"Deployment", *webhook_kinds}
    ]
    assert not any(a.startswith("--webhook") for a in container["args"])
    assert "webhook-cert" not in str(deployment)
    assert (
        "--metrics-addr=0.0.0.0:8443"
        in (
            next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"][
                "containers"
            ][0]["args"]
        )
    )


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Namespace", "/api/v1/namespaces/captf-system"),
        (
            "CustomResourceDefinition",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/terraformclusters.infrastructure.cluster.x-k8s.io",
        ),
        ("ClusterRole", "/apis/rbac.authorization.k8s.io/v1/clusterroles/captf-controller"),
        ("ServiceAccount", "/api/v1/namespaces/captf-system/serviceaccounts/captf-controller"),
        ("Deployment", "/apis/apps/v1/namespaces/captf-system/deployments/captf-controller"),
        (
            "PodDisruptionBudget",
            "/apis/policy/v1/namespaces/captf-system/poddisruptionbudgets/captf-controller",
        ),
    ],
)
def test_every_object_of_the_install_has_its_path(kind: str, path: str) -> None:
    obj = next(o for o in render(MANIFESTS) if o["kind"] == kind)
    assert path_of(obj, named=True) == path


def test_tests_sharing_an_api_server_restrict_the_install_to_their_namespace() -> None:
    fitted = on_process_node(render(MANIFESTS), metrics_port=1, time_scale=1, watch="team-a")
    [deployment] = [o for o in fitted if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-1] == "--namespace=team-a"
    assert "--time-scale=1" in args


def test_the_local_webhooks_call_loopback_with_their_own_certificate() -> None:
    """No cert-manager and no Service routing here: the install makes the Secret a
    Certificate would, and the configurations call 127.0.0.1 trusting that certificate."""
    webhook = LoopbackWebhook.make(4343)
    fitted = on_process_node(render(MANIFESTS), metrics_port=1, time_scale=1, webhook=webhook)
    kinds = [o["kind"] for o in fitted]
    assert not {"Issuer", "Certificate", "Service"} & set(kinds)
    [secret] = [o for o in fitted if o["kind"] == "Secret"]
    assert secret["metadata"]["name"] == WEBHOOK_SECRET
    # The Secret exists before the pods that mount it.
    assert kinds.index("Secret") < kinds.index("Deployment")
    ca = base64.b64encode(webhook.cert).decode()
    hooks = [h for o in fitted if o["kind"] in WEBHOOK_CONFIGURATIONS for h in o["webhooks"]]
    assert {h["clientConfig"]["url"] for h in hooks} == {
        "https://127.0.0.1:4343/validate",
        "https://127.0.0.1:4343/mutate-terraformplan",
    }
    assert all(h["clientConfig"]["caBundle"] == ca for h in hooks)
    # Every review fails closed but the identity deletion's, which a finalizer backs.
    policies = {h["name"]: h["failurePolicy"] for h in hooks}
    assert policies.pop("identity-deletion.infrastructure.cluster.x-k8s.io") == "Ignore"
    assert set(policies.values()) == {"Fail"}
    [deployment] = [o for o in fitted if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert "--webhook-addr=127.0.0.1:4343" in container["args"]
    # Apart, so that the node rewrites the mounted path.
    at = container["args"].index("--webhook-cert-dir")
    assert container["args"][at + 1] == "/etc/captf/webhook"
    # The CRDs convert through the same port and certificate, with no cert-manager.
    crds = [o for o in fitted if o["kind"] == "CustomResourceDefinition"]
    assert crds
    for crd in crds:
        config = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert config == {"url": "https://127.0.0.1:4343/convert", "caBundle": ca}
        assert "cert-manager.io/inject-ca-from" not in crd["metadata"].get("annotations", {})
