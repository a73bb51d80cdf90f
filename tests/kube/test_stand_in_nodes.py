"""The stand-in kubelets of `make run` (controller.dev.workload.NodeJoiner) on the real
API server, when someone deletes their Nodes while they beat, as Cluster API does for a
Machine it removes.

The joiner runs bare in the test's task group, unsupervised: an error escaping it fails
the test, as it ended `make run` (issue 33)."""

from __future__ import annotations

import time

import anyio
import pytest

from controller.core.basics.timefmt import parse_time
from controller.dev.node.registration import NODE_LEASES
from controller.dev.workload import NodeJoiner, node_name
from runtime.envtest import ApiServer
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.transport import Transport, open_transport
from tests.builders import capi_machine, capi_pool
from tests.kube.harness import eventually

pytestmark = pytest.mark.kube

# Heartbeats come every 10 s: a few of them.
WAIT = 45.0
HOLD = "test.captf.io/hold"


async def _machine(
    transport: Transport, ns: str, name: str, *, hold: bool = False, version: str = ""
) -> str:
    body = capi_machine(name)
    body["metadata"] = {"name": name, "labels": body["metadata"]["labels"]}
    if version:
        body["spec"]["version"] = version
    if hold:  # its deletion waits: the Machine stays, being deleted, as under Cluster API
        body["metadata"]["finalizers"] = [HOLD]
    provider_id = f"captf://{ns}/{name}"
    body["spec"]["providerID"] = provider_id
    path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/machines"
    await transport.request("POST", path, body=body)
    return provider_id


async def _get(transport: Transport, path: str) -> Json | None:
    try:
        return await transport.request("GET", path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise


def _node(provider_id: str) -> str:
    return f"/api/v1/nodes/{node_name(provider_id)}"


def _lease(provider_id: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASES}/leases/{node_name(provider_id)}"


def _ready(node: Json | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def test_a_deleted_node_ends_its_stand_in_and_every_other_beats_on(
    apiserver: ApiServer, namespace: str
) -> None:
    said: list[str] = []
    async with (
        open_transport(str(apiserver.kubeconfig)) as transport,
        anyio.create_task_group() as tg,
    ):
        joiner = NodeJoiner(transport, say=lambda who, text: said.append(text), namespace=namespace)
        tg.start_soon(joiner.run)
        keep = await _machine(transport, namespace, "keep")
        going = await _machine(transport, namespace, "going", hold=True)
        back = await _machine(transport, namespace, "back")
        for provider_id in (keep, going, back):

            async def joined(p: str = provider_id) -> bool:
                return _ready(await _get(transport, _node(p)))

            await eventually(joined, within=WAIT, what=f"the Node of {provider_id} Ready")
        kept_node = await transport.request("GET", _node(keep))

        # Cluster API removes a Machine: deleting it, then its Node.
        machines = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines"
        await transport.request("DELETE", f"{machines}/going", body={})
        await transport.request("DELETE", _node(going), body={})
        # Someone deletes the Node of a Machine that stays: its kubelet registers again.
        await transport.request("DELETE", _node(back), body={})
        deleted_at = time.time()

        async def lease_gone() -> bool:
            return await _get(transport, _lease(going)) is None

        await eventually(lease_gone, within=WAIT, what="the stand-in of the gone Machine stops")

        async def registered_again() -> Json | None:
            node = await _get(transport, _node(back))
            return node if _ready(node) else None

        again = await eventually(registered_again, within=WAIT, what="the Node back again")
        assert again["spec"]["providerID"] == back
        assert await _get(transport, _node(going)) is None

        # The others beat on: the kept Node's Lease is renewed after the deletions.
        async def renewed() -> bool:
            lease = await _get(transport, _lease(keep))
            renew = parse_time(((lease or {}).get("spec") or {}).get("renewTime"))
            return renew.timestamp() > deleted_at

        await eventually(renewed, within=WAIT, what="the kept Node's Lease renewed")
        kept = await transport.request("GET", _node(keep))
        assert _ready(kept)
        assert kept["metadata"]["uid"] == kept_node["metadata"]["uid"]

        # And the joiner goes on: a new Machine joins.
        new = await _machine(transport, namespace, "new")

        async def new_joined() -> bool:
            return _ready(await _get(transport, _node(new)))

        await eventually(new_joined, within=WAIT, what="a new Machine's Node")
        tg.cancel_scope.cancel()
    assert any("going" in text for text in said)


def _kubelet(node: Json | None) -> str:
    return str((((node or {}).get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion"))


async def test_a_stand_in_reports_the_version_its_machine_or_pool_asks_for(
    apiserver: ApiServer, namespace: str
) -> None:
    """As a kubelet of that version would (issue 43): Cluster API calls a Machine up to
    date only when its Node's kubeletVersion equals its spec.version. A machine that asks
    for none gets the API server's own version."""
    async with (
        open_transport(str(apiserver.kubeconfig)) as transport,
        anyio.create_task_group() as tg,
    ):
        joiner = NodeJoiner(transport, say=lambda who, text: None, namespace=namespace)
        tg.start_soon(joiner.run)
        asked = await _machine(transport, namespace, "asked", version="v1.35.0")
        unsaid = await _machine(transport, namespace, "unsaid")
        pool = capi_pool("pool")
        pool["metadata"] = {"name": "pool", "labels": pool["metadata"]["labels"]}
        pool["spec"]["template"]["spec"]["version"] = "v1.34.2"
        pool["spec"]["providerIDList"] = [f"captf://{namespace}/pool/0"]
        path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machinepools"
        await transport.request("POST", path, body=pool)
        server = (await transport.request("GET", "/version"))["gitVersion"]
        wanted = {asked: "v1.35.0", unsaid: server, f"captf://{namespace}/pool/0": "v1.34.2"}
        for provider_id, version in wanted.items():

            async def reports(p: str = provider_id) -> Json | None:
                node = await _get(transport, _node(p))
                return node if _ready(node) else None

            node = await eventually(reports, within=WAIT, what=f"the Node of {provider_id}")
            assert _kubelet(node) == version, provider_id
        tg.cancel_scope.cancel()
