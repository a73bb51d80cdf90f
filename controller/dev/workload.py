"""The workload cluster of a Cluster API cluster on this machine: the local API server
itself, and a stand-in for the kubelets of the machines the example modules "create".

Cluster API moves a Machine to Running once a Node in the workload cluster carries the
Machine's providerID; it finds the workload cluster through the `<cluster>-kubeconfig`
Secret. Here that Secret points at the local API server, and `NodeJoiner` registers a
Node for every providerID a Machine or MachinePool is given. It is not a kubelet: the
Node is an object with `spec.providerID`, nothing runs on it (the process node runs
every pod); only its status (Ready) and its Lease are kept alive as the process node's
are (controller.dev.node.registration), or kube-controller-manager would mark it
NotReady and Cluster API would count its machine unavailable (a MachinePool's phase
reaches Running only with every Node Ready). Its kubeletVersion is the version the
Machine or MachinePool asks for, as a kubelet of that version would report: Cluster API
calls a Machine up to date only when the two are equal. Cluster API looks at these
Nodes only once the Cluster's control plane is initialized: controller.dev.controlplane
reports the one `make run` has, the local API server.

The end-to-end tests run the role modules as ConfigMaps, `captf-module-<role>`, read
here from a directory per role (examples/modules/<role>); a directory the ConfigMap
could not carry faithfully is refused. (`make run` runs them as module images:
controller.dev.module_images.)

The bodies are plain functions so that the demo and the end-to-end tests build the
same objects."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from controller.core.basics.names import CAPI_MACHINE, CAPI_POOL, LABEL_CLUSTER_NAME
from controller.dev.node.registration import Registration
from controller.io.api import CAPI_OBJECTS
from runtime.cache import Informer, Selection
from runtime.clock import LoopClock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.supervise import supervised
from runtime.transport import Transport

Say = Callable[[str, str], None]
SECRET_TYPE = "cluster.x-k8s.io/secret"
# The Nodes' InternalIP: nothing listens there for them.
NODE_ADDRESS = "127.0.0.1"
MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"
ROLES = ("cluster", "machine", "machinepool")
_NOT_A_NAME = re.compile(r"[^a-z0-9.-]+")
# The API server refuses a ConfigMap whose keys and values add up to more bytes than this.
CONFIGMAP_LIMIT = 1024 * 1024
# What the API server accepts as a ConfigMap key.
_CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
# A Terraform module is at least one file of configuration, in either syntax.
_CONFIGURATION = (".tf", ".tf.json")


class ModuleDirInvalid(ValueError):
    """A module directory a ConfigMap cannot carry; the message is one line saying why."""


def read_module(directory: Path) -> dict[str, str]:
    """Every file of a role module directory by name: a ConfigMap's `data`, which the
    controller writes back out, file by file, as the module it runs. Raises
    ModuleDirInvalid when the directory is missing, holds no configuration, or holds what
    a ConfigMap cannot carry: a subdirectory (its keys are flat file names), a name that
    is not a key, text that is not UTF-8, more than CONFIGMAP_LIMIT bytes in all."""
    if not directory.is_dir():
        raise ModuleDirInvalid(f"{directory}: no such directory")
    files: dict[str, str] = {}
    for path in sorted(directory.iterdir()):
        files[path.name] = _module_file(path)
    if not any(name.endswith(_CONFIGURATION) for name in files):
        raise ModuleDirInvalid(f"{directory}: no .tf file, so no module")
    size = sum(len(name.encode()) + len(text.encode()) for name, text in files.items())
    if size > CONFIGMAP_LIMIT:
        why = f"{size} bytes, over the {CONFIGMAP_LIMIT} a ConfigMap may hold"
        raise ModuleDirInvalid(f"{directory}: {why}")
    return files


def _module_file(path: Path) -> str:
    if path.is_dir():
        why = "a ConfigMap carries only the files directly in a module directory, not nested"
        raise ModuleDirInvalid(f"{path}: is a directory; {why} ones")
    if not path.is_file():
        raise ModuleDirInvalid(f"{path}: not a regular file")
    if not _CONFIGMAP_KEY.fullmatch(path.name):
        raise ModuleDirInvalid(f"{path}: the name is not a ConfigMap key ([-._a-zA-Z0-9]+)")
    try:
        return path.read_bytes().decode()
    except UnicodeDecodeError:
        raise ModuleDirInvalid(f"{path}: not UTF-8 text, as a ConfigMap's data is") from None


def module_configmap(role: str, name: str | None = None, modules: Path = MODULES) -> Json:
    """`modules`/<role> (examples/modules/<role> by default) as a ConfigMap, one key per
    file, named `captf-module-<role>` unless `name` says otherwise. Raises
    ModuleDirInvalid as read_module does."""
    files = read_module(modules / role)
    meta = {"name": name or f"captf-module-{role}"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": files}


def module_configmaps(modules: Path) -> list[Json]:
    """The ConfigMaps `captf-module-<role>` of every role, from `modules`/<role>; all
    read before anything is applied, so bad input stops `make run` before it starts."""
    if not modules.is_dir():
        raise ModuleDirInvalid(f"{modules}: no such directory (it holds {', '.join(ROLES)})")
    return [module_configmap(role, modules=modules) for role in ROLES]


def kubeconfig_secret(cluster: str, kubeconfig: bytes) -> Json:
    """`<cluster>-kubeconfig` as Cluster API reads it: the kubeconfig under `value`. The
    cluster-name label is required: Cluster API's cache watches only labelled Secrets."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": SECRET_TYPE,
        "metadata": {"name": f"{cluster}-kubeconfig", "labels": {LABEL_CLUSTER_NAME: cluster}},
        "data": {"value": base64.b64encode(kubeconfig).decode()},
    }


def node_name(provider_id: str) -> str:
    """A Node name for `provider_id` (`captf://demo/demo-md-0-x` -> `demo-demo-md-0-x`):
    the part after the scheme, as a DNS subdomain; one providerID, one name."""
    rest = provider_id.split("://", 1)[-1].lower()
    return _NOT_A_NAME.sub("-", rest).strip("-.")[:63].rstrip("-.") or "node"


def node(provider_id: str, name: str | None = None) -> Json:
    """A Node carrying `provider_id`, as that machine's kubelet would register it."""
    meta = {"name": name or node_name(provider_id)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"providerID": provider_id},
    }


def asked_version(obj: Json) -> str:
    """The Kubernetes version a Machine (spec.version) or a MachinePool (its template's)
    asks its machines to run; "" when it names none."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == CAPI_POOL:
        spec = ((spec.get("template") or {}).get("spec")) or {}
    return str(spec.get("version") or "")


def provider_ids(obj: Json) -> list[str]:
    """A Machine's spec.providerID, or a MachinePool's spec.providerIDList."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == CAPI_POOL:
        return [str(p) for p in spec.get("providerIDList") or [] if p]
    return [str(spec["providerID"])] if spec.get("providerID") else []


class NodeJoiner:
    """Registers a Node for each providerID that appears on a Machine or MachinePool, once
    (an existing Node keeps its spec), keeps it Ready, and says so through `say`. Its
    kubeletVersion is the version that Machine or MachinePool asks for when the providerID
    first appears, as a kubelet of that version would report (Cluster API calls a Machine
    up to date only when the two are equal), else the API server's own. Nodes are
    never deleted here: a Machine that goes takes nothing with it, as a real Node lingers
    until someone removes it. Cluster API does, for a Machine it deletes: that stand-in's
    heartbeat then ends, unless a Machine or MachinePool not being deleted still carries
    its providerID (then it registers again, as a kubelet whose Node went would).

    Each stand-in's heartbeat is supervised: its unexpected error is logged with its
    Node's name and that heartbeat alone starts again; nothing of one stand-in ends the
    joiner, or `make run`."""

    def __init__(self, transport: Transport, *, say: Say, namespace: str | None = None) -> None:
        """`namespace`: only its Machines and MachinePools (default: every namespace's)."""
        self._transport = transport
        self._say = say
        self._namespace = namespace
        self._seen: set[str] = set()
        self._clock = LoopClock()
        self._informers: list[Informer] = []
        self._server_version = ""

    async def run(self) -> None:
        """Until cancelled. Run again after a failure, it starts afresh: new informers,
        and every providerID joins again (its heartbeat ended with the last run)."""
        self._seen = set()
        self._informers = [
            Informer(
                self._transport,
                CAPI_OBJECTS[kind],
                clock=self._clock,
                selection=Selection(namespace=self._namespace),
            )
            for kind in (CAPI_MACHINE, CAPI_POOL)
        ]
        send, receive = anyio.create_memory_object_stream[tuple[str, str, str]](1000)
        for informer in self._informers:
            informer.add_handler(self._handler(send))
        async with anyio.create_task_group() as tg:
            for informer in self._informers:
                tg.start_soon(informer.run)
            async with receive:
                async for who, provider_id, version in receive:
                    registration = await self._join(who, provider_id, version)
                    if registration is not None:
                        tg.start_soon(self._beat, provider_id, registration)

    async def _beat(self, provider_id: str, registration: Registration) -> None:
        name = node_name(provider_id)
        await supervised(f"stand-in kubelet of Node {name}", registration.heartbeat, self._clock)
        # Its Node and its machine are gone: a providerID that comes back joins again.
        self._seen.discard(provider_id)

    def _carried(self, provider_id: str) -> bool:
        """Whether a Machine or MachinePool not being deleted carries `provider_id`."""
        return any(
            provider_id in provider_ids(obj)
            for informer in self._informers
            for obj in informer.store
            if not obj["metadata"].get("deletionTimestamp")
        )

    def _handler(self, send: MemoryObjectSendStream[tuple[str, str, str]]) -> Any:
        def handler(_old: Json | None, new: Json | None) -> None:
            if new is None:
                return
            who = f"{new.get('kind')}/{new['metadata']['name']}"
            for provider_id in provider_ids(new):
                if provider_id not in self._seen:
                    self._seen.add(provider_id)
                    send.send_nowait((who, provider_id, asked_version(new)))

        return handler

    async def _join(self, who: str, provider_id: str, version: str) -> Registration | None:
        """The Node created (or found) and its status Ready, reporting kubelet `version`
        (the API server's when ""); None when the API refused."""
        body = node(provider_id)
        name = body["metadata"]["name"]
        try:
            registration = Registration(
                self._transport,
                name,
                NODE_ADDRESS,
                self._clock,
                wanted=lambda: self._carried(provider_id),
                body=body,
                version=version or await self._api_server_version(),
            )
            # Creates the Node, or finds it there (409), and writes its Ready status and Lease.
            await registration.register()
        except ApiError as err:
            self._say(who, f"no Node for {provider_id}: {err}")
            return None
        self._say(who, f"Node {name} joined with providerID {provider_id} (stand-in kubelet)")
        return registration

    async def _api_server_version(self) -> str:
        """The workload cluster's API server version (its /version gitVersion), read once."""
        if not self._server_version:
            answer = await self._transport.request("GET", "/version")
            self._server_version = str(answer["gitVersion"])
        return self._server_version
