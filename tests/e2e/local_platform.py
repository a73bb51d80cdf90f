"""What a cluster gives a provider that clusterctl installs, stood in for on the local
cluster, which has no cert-manager and no Service network (a pod's address is a
loopback address, which no EndpointSlice may hold, so the API server cannot reach a
webhook through its Service):

- cert-manager's API: its Issuer and Certificate kinds, as CRDs that keep any field, so
  that clusterctl finds cert-manager installed (it creates a test Issuer and Certificate)
  and the components' own are stored;
- cert-manager's issuer: each Certificate's Secret, one self-signed pair for 127.0.0.1;
- its CA injector and the Service network at once: every webhook configuration and CRD
  conversion of the provider (by clusterctl's provider label) annotated
  `cert-manager.io/inject-ca-from` calls https://127.0.0.1:PORT instead of its Service,
  trusting that pair;
- for the process node, which gives pods no network of their own: the controller's
  Deployment, whenever it is created or updated, binds its metrics and probes to each
  pod's address and its webhooks to PORT, shared by its replicas (SO_REUSEPORT), as `make
  run`'s install does (controller/dev/install.py). A mutating admission webhook of this
  platform does it, so no pod of an unfitted Deployment is ever made. It compresses the
  controller's time (`--time-scale`) on the timeline recorded in its namespace before any
  replica starts, as `make run` does (the replicas may read it, not create it).

The same for every release: the release installed and the one upgraded to meet the same
cluster. Nothing here imitates a controller the tests run: Cluster API's, the Job and
Deployment controllers and CAPTF's are the real ones."""

from __future__ import annotations

import base64
import contextlib
import copy
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio

from controller.core.basics.names import TIME_ORIGIN
from controller.dev.install import LoopbackWebhook, free_port
from runtime.admission import ALLOW, AdmissionServer, Answer
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.timeorigin import scaled_clock
from runtime.transport import Transport

log = logging.getLogger("tests.local_platform")
CERT_MANAGER = "cert-manager.io"
INJECT_CA = "cert-manager.io/inject-ca-from"
PROVIDER_LABEL = "cluster.x-k8s.io/provider"
DEPLOYMENT = "captf-controller"
NAMESPACE = "captf-system"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ROUND = 0.25


def _cert_manager_crd(kind: str, plural: str) -> Json:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{CERT_MANAGER}"},
        "spec": {
            "group": CERT_MANAGER,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
            },
            "versions": [
                {
                    "name": "v1",
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


def fitted_container(container: Json, webhook_port: int, time_scale: float) -> Json:
    """The manager container with its addresses for the process node (idempotent)."""
    fitted = copy.deepcopy(container)
    args: list[str] = []
    for arg in container.get("args") or []:
        flag, eq, value = arg.partition("=")
        if eq and flag in ("--metrics-addr", "--health-probe-addr"):
            args.append(f"{flag}=$(POD_IP):{value.rsplit(':', 1)[1]}")
        elif eq and flag == "--webhook-addr":
            args.append(f"{flag}=127.0.0.1:{webhook_port}")
        elif eq and flag == "--webhook-cert-dir":
            # The node rewrites an argument that is a mounted path, not `--flag=path`.
            args += [flag, value]
        elif not (eq and flag == "--time-scale"):
            args.append(arg)
    fitted["args"] = [*args, f"--time-scale={time_scale:g}"]
    env = [e for e in container.get("env") or [] if e["name"] != "POD_IP"]
    pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    fitted["env"] = [*env, pod_ip]
    return fitted


class LocalPlatform:
    """`async with LocalPlatform(transport, time_scale=60) as platform:` until the block
    ends; `platform.webhook_port` is where the provider's webhooks are called."""

    def __init__(self, transport: Transport, *, time_scale: float) -> None:
        self._api = transport
        self._scale = time_scale
        self.webhook_port = free_port()
        # The pair every Certificate gets (for 127.0.0.1), and this platform's own.
        self._issued = LoopbackWebhook.make(self.webhook_port)
        self._own = LoopbackWebhook.make(free_port())

    @contextlib.asynccontextmanager
    async def running(self, cert_dir: Any) -> AsyncIterator[LocalPlatform]:
        for kind, plural in (("Issuer", "issuers"), ("Certificate", "certificates")):
            await self._ensure(CRDS, _cert_manager_crd(kind, plural))
        await self._ensure("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        await scaled_clock(self._api, NAMESPACE, TIME_ORIGIN, self._scale)
        cert_dir.mkdir(parents=True, exist_ok=True)
        (cert_dir / "tls.crt").write_bytes(self._own.cert)
        (cert_dir / "tls.key").write_bytes(self._own.key)
        server = AdmissionServer(
            {"/fit": self._fit}, address=f"127.0.0.1:{self._own.port}", cert_dir=cert_dir
        )
        async with server, anyio.create_task_group() as tg:
            await self._ensure(f"{ADMISSION}/mutatingwebhookconfigurations", self._fitting())
            tg.start_soon(self._reconcile_forever)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True), contextlib.suppress(ApiError):
                    path = f"{ADMISSION}/mutatingwebhookconfigurations/local-platform"
                    await self._api.request("DELETE", path)

    # -- the Deployment, fitted as it is stored -------------------------------------------

    def _fitting(self) -> Json:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "local-platform"},
            "webhooks": [
                {
                    "name": "fit.local-platform.captf.io",
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {
                        "url": self._own.url("/fit"),
                        "caBundle": base64.b64encode(self._own.cert).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["deployments"],
                        }
                    ],
                    "matchConditions": [
                        {"name": "ours", "expression": f"object.metadata.name == '{DEPLOYMENT}'"}
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                }
            ],
        }

    async def _fit(self, request: Json) -> Answer:
        deployment = request.get("object") or {}
        containers = deployment["spec"]["template"]["spec"]["containers"]
        fitted = [
            fitted_container(c, self.webhook_port, self._scale) if c["name"] == "manager" else c
            for c in containers
        ]
        if fitted == containers:
            return ALLOW
        op = {"op": "replace", "path": "/spec/template/spec/containers", "value": fitted}
        return Answer(allowed=True, patch=(op,))

    # -- cert-manager's issuer and CA injector, and the Service network -------------------

    async def _reconcile_forever(self) -> None:
        while True:
            try:
                await self._issue()
                await self._inject()
            except ApiError as error:
                if error.status not in (404, 409):
                    log.warning("local platform: %s", error)
            await anyio.sleep(ROUND)

    async def _issue(self) -> None:
        listed = await self._api.request("GET", f"/apis/{CERT_MANAGER}/v1/certificates")
        for cert in listed.get("items") or []:
            meta, spec = cert["metadata"], cert.get("spec") or {}
            data = {
                "tls.crt": self._issued.cert,
                "tls.key": self._issued.key,
                "ca.crt": self._issued.cert,
            }
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {"name": spec.get("secretName", meta["name"])},
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
            }
            await self._ensure(f"/api/v1/namespaces/{meta['namespace']}/secrets", secret)

    async def _inject(self) -> None:
        selector = {"labelSelector": PROVIDER_LABEL}
        bundle = base64.b64encode(self._issued.cert).decode()
        for plural in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            listed = await self._api.request("GET", f"{ADMISSION}/{plural}", params=selector)
            for obj in listed.get("items") or []:
                hooks = obj.get("webhooks") or []
                if INJECT_CA in _annotations(obj) and _redirect(hooks, self._url, bundle):
                    path = f"{ADMISSION}/{plural}/{obj['metadata']['name']}"
                    await self._api.request("PUT", path, body=obj)
        listed = await self._api.request("GET", CRDS, params=selector)
        for crd in listed.get("items") or []:
            hook = (crd["spec"].get("conversion") or {}).get("webhook")
            if INJECT_CA in _annotations(crd) and hook and _redirect([hook], self._url, bundle):
                await self._api.request("PUT", f"{CRDS}/{crd['metadata']['name']}", body=crd)

    def _url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.webhook_port}{path}"

    async def _ensure(self, collection: str, obj: Json) -> None:
        try:
            await self._api.request("POST", collection, body=obj)
        except ApiError as error:
            if error.status != 409:
                raise


def _annotations(obj: Json) -> dict[str, str]:
    found: dict[str, str] = obj["metadata"].get("annotations") or {}
    return found


def _redirect(hooks: list[Json], url: Any, bundle: str) -> bool:
    """Each hook calling its Service now calls `url(path)` trusting `bundle`; whether any
    changed."""
    changed = False
    for hook in hooks:
        config = hook.get("clientConfig") or {}
        service = config.get("service")
        if service is None and config.get("caBundle") == bundle:
            continue
        path = (service or {}).get("path") or "/"
        hook["clientConfig"] = {"url": url(path) if service else config["url"], "caBundle": bundle}
        changed = True
    return changed
