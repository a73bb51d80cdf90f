"""The controller installed from manifests/ onto the local cluster, as users install it.

`render` is `kubectl kustomize manifests/` (controller.dev.kustomize); `apply` creates
each object, or replaces it if it exists, in the kustomization's order. Between the
two, `on_process_node` fits the controller's Deployment to the process node, which
runs every pod on this machine's network without isolation:

- the metrics port is one the caller found free (8080 is often taken here), and the
  controller binds it on its pod's own loopback address (`$(POD_IP)`), since two
  replicas on one network cannot both bind every interface;
- `--time-scale` and a text log format, for `make run`; and, for tests that share one
  API server, the namespace to watch.

The admission webhooks (manifests/webhook/) need cert-manager and a Service, which the
local cluster has neither of. With a `LoopbackWebhook`, the install stands in for both:
it creates the Secret cert-manager would (a pair self-signed for 127.0.0.1, made here),
points the webhook configurations and the CRDs' conversion webhook at
`https://127.0.0.1:PORT/...` with that certificate as their caBundle, and both replicas
listen on that one loopback port (SO_REUSEPORT, see runtime/admission.py), as a Service
would spread reviews over them. Without one, the admission webhooks are left out: tests
that share an API server must not have their objects reviewed by a controller that is
not running; the CRDs keep their conversion through the Service, which nothing serves
there, so a v1alpha1 request fails rather than being converted wrongly.

Everything else (the ServiceAccount, its RBAC, probes, rollout, the PodDisruption-
Budget) is the install as written."""

from __future__ import annotations

import base64
import copy
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from controller.dev.kustomize import CLUSTER_SCOPED
from controller.io.api import resource_path
from runtime.cache.resource import Resource
from runtime.certs import self_signed
from runtime.envtest import RequestFailed
from runtime.jsonobj import Json

NAMESPACE = "captf-system"
DEPLOYMENT = "captf-controller"
PLURALS = {
    "Namespace": "namespaces",
    "CustomResourceDefinition": "customresourcedefinitions",
    "ServiceAccount": "serviceaccounts",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Deployment": "deployments",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "Service": "services",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
}
# What cert-manager makes in a cluster; the local cluster has no cert-manager.
CERT_MANAGER_KINDS = {"Issuer", "Certificate"}
WEBHOOK_CONFIGURATIONS = {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
WEBHOOK_SECRET = "captf-webhook-cert"
INJECT_CA = "cert-manager.io/inject-ca-from"


@dataclass(frozen=True)
class LoopbackWebhook:
    """The webhooks on 127.0.0.1:`port` with a self-signed certificate (`cert`, `key`: PEM)."""

    port: int
    cert: bytes
    key: bytes

    @classmethod
    def make(cls, port: int) -> LoopbackWebhook:
        with tempfile.TemporaryDirectory(prefix="captf-webhook-cert-") as work:
            cert, key = self_signed(Path(work), common_name="captf-webhook")
            return cls(port, cert.read_bytes(), key.read_bytes())

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def secret(self) -> Json:
        """The Secret cert-manager's Certificate would make."""
        data = {"tls.crt": self.cert, "tls.key": self.key, "ca.crt": self.cert}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        }

    def crd(self, obj: Json) -> Json:
        """A CRD of the manifests whose conversion webhook calls 127.0.0.1, trusting the
        certificate (cert-manager's CA injector would fill the caBundle in)."""
        fitted = copy.deepcopy(obj)
        (fitted["metadata"].get("annotations") or {}).pop(INJECT_CA, None)
        hook = (fitted["spec"].get("conversion") or {}).get("webhook")
        if hook is not None:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": self.url(path),
                "caBundle": base64.b64encode(self.cert).decode(),
            }
        return fitted

    def configuration(self, obj: Json) -> Json:
        """A webhook configuration of the manifests, calling 127.0.0.1 and trusting the
        certificate."""
        fitted = copy.deepcopy(obj)
        (fitted["metadata"].get("annotations") or {}).pop(INJECT_CA, None)
        for hook in fitted["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": self.url(path),
                "caBundle": base64.b64encode(self.cert).decode(),
            }
        return fitted


class Api(Protocol):
    """What this needs of runtime.envtest.ApiServer."""

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        content_type: str = "application/json",
        *,
        params: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]: ...


def free_port() -> int:
    """A TCP port free on every local address right now (the caller binds it soon after)."""
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        port: int = probe.getsockname()[1]
        return port


def path_of(obj: Json, *, named: bool = False) -> str:
    """The collection of `obj` (or the object itself, with `named`)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    kind, meta = obj["kind"], obj["metadata"]
    resource = Resource(group, version, PLURALS[kind], namespaced=kind not in CLUSTER_SCOPED)
    return resource_path(resource, meta.get("namespace") or None, meta["name"] if named else "")


def apply(api: Api, objects: list[Json]) -> None:
    """Create each object in order; one that exists already is replaced."""
    for obj in objects:
        try:
            api.request("POST", path_of(obj), obj)
        except RequestFailed as error:
            if error.status != 409:
                raise
            _replace(api, obj)


def _replace(api: Api, obj: Json, attempts: int = 5) -> None:
    """PUT over the current version; a controller writing the object's status meanwhile
    (the disruption controller, a PodDisruptionBudget's) makes it 409 Conflict: again."""
    for attempt in range(attempts):
        current = api.request("GET", path_of(obj, named=True))
        replaced = copy.deepcopy(obj)
        replaced["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        try:
            api.request("PUT", path_of(obj, named=True), replaced)
            return
        except RequestFailed as error:
            if error.status != 409 or attempt == attempts - 1:
                raise


def on_process_node(
    objects: list[Json],
    *,
    metrics_port: int,
    time_scale: float,
    watch: str | None = None,
    webhook: LoopbackWebhook | None = None,
) -> list[Json]:
    """`objects` with the controller's Deployment fitted to the process node (see above);
    `watch`: the only namespace it reconciles (default: all); `webhook`: the admission
    webhooks on loopback (default: left out)."""
    fitted = []
    for obj in copy.deepcopy(objects):
        kind = obj["kind"]
        if kind in CERT_MANAGER_KINDS or (kind == "Service" and _is_webhook_service(obj)):
            continue
        if kind in WEBHOOK_CONFIGURATIONS:
            if webhook is not None:
                fitted.append(webhook.configuration(obj))
            continue
        if kind == "CustomResourceDefinition" and webhook is not None:
            fitted.append(webhook.crd(obj))
            continue
        if kind == "Deployment" and obj["metadata"]["name"] == DEPLOYMENT:
            pod = obj["spec"]["template"]["spec"]
            [container] = pod["containers"]
            _fit(container, metrics_port, time_scale, watch)
            _fit_webhook(pod, container, webhook)
            if webhook is not None:
                fitted.append(webhook.secret())
        fitted.append(obj)
    return fitted


def _is_webhook_service(obj: Json) -> bool:
    return bool(obj["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "webhook")


def _fit_webhook(pod: Json, container: Json, webhook: LoopbackWebhook | None) -> None:
    """The webhook on the loopback port, or (without one) not served at all."""
    args = [a for a in container["args"] if not a.startswith("--webhook-addr=")]
    if webhook is None:
        container["args"] = [a for a in args if not a.startswith("--webhook-cert-dir=")]
        container["ports"] = [p for p in container["ports"] if p["name"] != "webhook"]
        mounts = container.get("volumeMounts", [])
        container["volumeMounts"] = [m for m in mounts if m["name"] != "webhook-cert"]
        pod["volumes"] = [v for v in pod.get("volumes", []) if v["name"] != "webhook-cert"]
        return
    # The node rewrites an argument that is a mounted path, not a `--flag=path`.
    split = [
        part
        for a in args
        for part in (a.split("=", 1) if a.startswith("--webhook-cert-dir=") else [a])
    ]
    container["args"] = [*split, f"--webhook-addr=127.0.0.1:{webhook.port}"]
    for declared in container["ports"]:
        if declared["name"] == "webhook":
            declared["containerPort"] = webhook.port


def _fit(container: Json, port: int, time_scale: float, watch: str | None) -> None:
    # Plain HTTP metrics and probes on one port of the pod's own address: replicas share
    # the machine, and scrapes here are local.
    replaced = (
        "--metrics-addr=",
        "--log-format=",
        "--namespace=",
        "--metrics-secure",
        "--health-probe-addr=",
    )
    args = [a for a in container["args"] if not a.startswith(replaced)]
    container["args"] = [
        *args,
        f"--metrics-addr=$(POD_IP):{port}",
        f"--time-scale={time_scale:g}",
        "--log-format=text",
        *([f"--namespace={watch}"] if watch else []),
    ]
    env = [e for e in container.get("env", []) if e["name"] != "POD_IP"]
    pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    container["env"] = [*env, pod_ip]
    container["ports"] = [p for p in container["ports"] if p["name"] != "health"]
    for probe in ("livenessProbe", "readinessProbe"):
        get = (container.get(probe) or {}).get("httpGet") or {}
        if get.get("port") == "health":
            get["port"] = "metrics"
    for declared in container["ports"]:
        if declared["name"] == "metrics":
            declared["containerPort"] = port
