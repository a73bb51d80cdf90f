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

Everything else (the ServiceAccount, its RBAC, probes, rollout, the PodDisruption-
Budget) is the install as written."""

from __future__ import annotations

import copy
import socket
from collections.abc import Mapping
from typing import Any, Protocol

from controller.dev.kustomize import CLUSTER_SCOPED
from controller.io.api import resource_path
from runtime.cache.resource import Resource
from runtime.envtest import RequestFailed

Json = dict[str, Any]

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
}


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
    objects: list[Json], *, metrics_port: int, time_scale: float, watch: str | None = None
) -> list[Json]:
    """`objects` with the controller's Deployment fitted to the process node (see above);
    `watch`: the only namespace it reconciles (default: all)."""
    fitted = copy.deepcopy(objects)
    for obj in fitted:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == DEPLOYMENT:
            [container] = obj["spec"]["template"]["spec"]["containers"]
            _fit(container, metrics_port, time_scale, watch)
    return fitted


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
