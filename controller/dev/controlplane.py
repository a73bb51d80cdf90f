"""The control plane of `make run`'s clusters: the local API server, which is their
workload cluster, reported on a LocalControlPlane (controlplane.dev.captf.io/v1alpha1)
that each Cluster's controlPlaneRef names. Its CRD is crds/localcontrolplanes.yaml.

Cluster API v1.14 computes a Cluster's ControlPlaneAvailable only from a control plane
object: a Cluster without controlPlaneRef (stand-alone control-plane Machines) reads
Unknown there for ever, so never Available. And it inspects no worker's Node until
ControlPlaneInitialized is True, which it reads from the same object. The control plane
here is made of no Machines: it is the kube-apiserver `make run` started, as a hosted
control plane is someone else's, so the object says `externalManagedControlPlane` (then
Cluster API also deletes the Node of a Machine it removes).

`ControlPlaneReporter` is the stand-in for that object's provider, as NodeJoiner is for
the kubelets (controller.dev.workload). Every PROBE_SECONDS it asks the API server its
/readyz and /version, and writes on each LocalControlPlane what a control-plane provider
would: initialized once its Cluster's infrastructure is provisioned and the API server
has answered ready (never undone, as the contract wants), Available while both hold, the
server's version. Polling, like a kubelet's heartbeat: one probe serves every object, and
a status is written only when it changed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import anyio

from controller.core.basics.names import CAPI_CLUSTER
from controller.core.basics.timefmt import format_time
from controller.io.api import CAPI_OBJECTS, resource_path
from runtime.cache.resource import Resource
from runtime.clock import Clock, LoopClock
from runtime.errors import ApiError, is_transient
from runtime.jsonobj import Json
from runtime.transport import MERGE_PATCH, Transport

GROUP = "controlplane.dev.captf.io"
VERSION = "v1alpha1"
KIND = "LocalControlPlane"
CONTROL_PLANES = Resource(GROUP, VERSION, "localcontrolplanes")
# The directory of its CRD, for ApiServer.install_crds.
CRDS = Path(__file__).resolve().parent / "crds"
PROBE_SECONDS = 5.0
# Longer than a ready API server takes to answer /readyz under load.
_PROBE_TIMEOUT = 10.0
AVAILABLE = "Available"

Say = Callable[[str, str], None]
logger = logging.getLogger("controller.dev.controlplane")


@dataclass(frozen=True)
class Probe:
    """What the API server answered: ready or not (with why), and its gitVersion ("" when
    it did not say)."""

    ready: bool
    version: str = ""
    why: str = ""


def control_plane(name: str) -> Json:
    """A LocalControlPlane named `name`: nothing to ask for, its status is reported."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {},
    }


def reference(name: str) -> Json:
    """A Cluster's spec.controlPlaneRef to the LocalControlPlane `name`."""
    return {"apiGroup": GROUP, "kind": KIND, "name": name}


def control_plane_status(obj: Json, cluster: Json | None, probe: Probe, now: datetime) -> Json:
    """The status the LocalControlPlane `obj` should carry, given its Cluster (None until
    one owns it), the probe and the time. Pure; equal to obj's status when nothing moved."""
    old: Json = obj.get("status") or {}
    provisioned = _infrastructure_provisioned(cluster)
    available, reason, message = _availability(cluster, provisioned, probe)
    initialized = bool((old.get("initialization") or {}).get("controlPlaneInitialized"))
    status: Json = {
        "initialization": {"controlPlaneInitialized": initialized or available},
        "externalManagedControlPlane": True,
        "conditions": [
            _condition(old, available, reason, message, obj, now),
        ],
    }
    version = probe.version or old.get("version")
    if version:
        status["version"] = version
    return status


def _availability(cluster: Json | None, provisioned: bool, probe: Probe) -> tuple[bool, str, str]:
    if cluster is None:
        return False, "WaitingForCluster", "Waiting for a Cluster to own it"
    if not provisioned:
        why = "Waiting for Cluster status.initialization.infrastructureProvisioned"
        return False, "WaitingForClusterInfrastructure", why
    if not probe.ready:
        return False, "APIServerNotReady", f"The API server is not ready: {probe.why}"
    return True, AVAILABLE, ""


def _condition(
    old: Json, available: bool, reason: str, message: str, obj: Json, now: datetime
) -> Json:
    """Available, its lastTransitionTime kept while its status holds."""
    status = "True" if available else "False"
    before = available_condition(old)
    since = before.get("lastTransitionTime") if before.get("status") == status else None
    condition: Json = {
        "type": AVAILABLE,
        "status": status,
        "reason": reason,
        "lastTransitionTime": since or format_time(now),
    }
    if message:
        condition["message"] = message
    generation = (obj.get("metadata") or {}).get("generation")
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def available_condition(status: Json) -> Json:
    """The Available condition of a LocalControlPlane's `status` ({} when it has none)."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == AVAILABLE:
            found: Json = condition
            return found
    return {}


def _infrastructure_provisioned(cluster: Json | None) -> bool:
    initialization = ((cluster or {}).get("status") or {}).get("initialization") or {}
    return initialization.get("infrastructureProvisioned") is True


def owner_cluster(obj: Json) -> str | None:
    """The name of the Cluster that owns `obj` (Cluster API adds the reference once it
    reconciles the Cluster), else None."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("kind") == CAPI_CLUSTER and owner.get("apiVersion", "").startswith(
            "cluster.x-k8s.io/"
        ):
            return str(owner["name"])
    return None


async def probe_api_server(transport: Transport) -> Probe:
    """/readyz and /version of the API server `transport` reaches."""
    try:
        with anyio.fail_after(_PROBE_TIMEOUT):
            version = await transport.request("GET", "/version")
            # /readyz answers text, not JSON: read it raw, as a one-shot stream.
            async with transport.stream("/readyz", params={}) as lines:
                said = b"".join([line async for line in lines]).decode(errors="replace")
    except (ApiError, TimeoutError) as err:
        return Probe(False, why=_short(str(err)))
    except Exception as err:
        if not is_transient(err):
            raise
        return Probe(False, why=_short(f"{type(err).__name__}: {err}"))
    if said.strip() != "ok":
        return Probe(False, str(version.get("gitVersion") or ""), _short(said))
    return Probe(True, str(version.get("gitVersion") or ""))


def _short(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no answer"
    return line[:200]


class ControlPlaneReporter:
    """Keeps the status of every LocalControlPlane (of `namespace`, default every one)
    true to the API server `transport` reaches, and says each change of Available
    through `say`."""

    def __init__(
        self,
        transport: Transport,
        *,
        say: Say,
        namespace: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._transport = transport
        self._say = say
        self._namespace = namespace
        self._clock = clock or LoopClock()

    async def run(self) -> None:
        """Until cancelled. A transient error (an API server restarting, a CRD's storage
        still initializing) is logged and the next round tries again, as a heartbeat
        goes on; any other error ends the run."""
        while True:
            try:
                await self.report()
            except Exception as err:
                if not is_transient(err):
                    raise
                logger.warning("control plane report: %s", err)
            await self._clock.sleep(PROBE_SECONDS)

    async def report(self) -> None:
        """One round: probe once, then write each object's status that changed."""
        probe = await probe_api_server(self._transport)
        path = resource_path(CONTROL_PLANES, self._namespace)
        for obj in (await self._transport.request("GET", path))["items"]:
            await self._report_one(obj, probe)

    async def _report_one(self, obj: Json, probe: Probe) -> None:
        meta = obj["metadata"]
        cluster = await self._cluster(meta["namespace"], owner_cluster(obj))
        status = control_plane_status(obj, cluster, probe, self._clock.now())
        if status == obj.get("status"):
            return
        path = resource_path(CONTROL_PLANES, meta["namespace"], meta["name"], sub="status")
        try:
            await self._transport.request(
                "PATCH", path, body={"status": status}, content_type=MERGE_PATCH
            )
        except ApiError as err:
            if err.status == 404:  # deleted since the list
                return
            raise
        self._say_change(obj, status)

    def _say_change(self, obj: Json, status: Json) -> None:
        new = available_condition(status)
        old = available_condition(obj.get("status") or {})
        if (old.get("status"), old.get("reason")) == (new["status"], new["reason"]):
            return
        line = f"Available {new['status']}"
        if new["status"] != "True":
            line += f" ({new['reason']}: {new.get('message', '')})"
        else:
            line += f": the API server {status.get('version', '')} answers ready"
        self._say(f"{KIND}/{obj['metadata']['name']}", line)

    async def _cluster(self, namespace: str, name: str | None) -> Json | None:
        if name is None:
            return None
        try:
            return await self._transport.request(
                "GET", resource_path(CAPI_OBJECTS[CAPI_CLUSTER], namespace, name)
            )
        except ApiError as err:
            if err.status == 404:
                return None
            raise
