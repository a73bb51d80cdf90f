"""State names on the real API server: a state and its backups written under the names
before kinds were part of them are moved to the new names by the controller, with no
Job and the same serial, and a deletion never reads "state lost" meanwhile; a Secret
of our name without our labels is never read as a state."""

from __future__ import annotations

import base64
import os

import orjson
import pytest

from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    ANN_SERIAL,
    CLUSTER,
    LABEL_BACKUP_OF,
    LABEL_CLUSTERCTL_MOVE,
    LABEL_KIND,
    LABEL_NAME,
    MANAGED_BY,
    state_part_names,
)
from controller.core.decide import snapshot
from controller.core.decide.context import read_spec
from controller.core.spec.policy import RunnerPolicy
from controller.runner.kube import TransportKube
from controller.runner.state import StateStore
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import (
    Kube,
    condition_is,
    eventually,
    nth_job,
    running_controller,
    state_of,
)

pytestmark = pytest.mark.kube
OURS = {LABEL_KIND: CLUSTER, LABEL_NAME: "c1", LABEL_CLUSTERCTL_MOVE: ""} | MANAGED_BY


def _tfstate(serial: int) -> str:
    body = {"version": 4, "serial": serial, "lineage": "l-c1", "resources": []}
    return base64.b64encode(orjson.dumps(body)).decode()


async def _current_hash(kube: Kube) -> str:
    """The inputs hash the controller computes for c1, from the objects it reads."""
    obj = await kube.cluster()
    ns = f"/api/v1/namespaces/{kube.ns}"
    module = await kube.call("GET", f"{ns}/configmaps/c1-module")
    creds = await kube.call("GET", f"{ns}/secrets/creds")
    owner = await kube.call("GET", kube.capi_path("clusters", "c1"))
    items = [module | {"kind": "ConfigMap"}, creds | {"kind": "Secret"}, owner]
    snap = snapshot.build(obj | {"kind": CLUSTER}, items)
    inputs = read_spec(snap, RunnerPolicy()).inputs
    assert inputs is not None
    return inputs.hash


async def _write_old_layout(kube: Kube, inputs_hash: str) -> None:
    secrets = f"/api/v1/namespaces/{kube.ns}/secrets"
    state = {
        "metadata": {
            "name": "c1-state",
            "labels": OURS,
            "annotations": {ANN_SERIAL: "3", ANN_INPUTS_HASH: inputs_hash},
        },
        "data": {"terraform.tfstate": _tfstate(3)},
    }
    backup = {
        "metadata": {
            "name": "c1-state-2",
            "labels": OURS | {LABEL_BACKUP_OF: "c1"},
            "annotations": {ANN_SERIAL: "2", ANN_INPUTS_HASH: inputs_hash},
        },
        "data": {"terraform.tfstate": _tfstate(2)},
    }
    for body in (state, backup):
        await kube.call("POST", secrets, body)


async def _secret_or_none(kube: Kube, name: str) -> Json | None:
    found = await kube.call("GET", f"/api/v1/namespaces/{kube.ns}/secrets")
    return next((s for s in found["items"] if s["metadata"]["name"] == name), None)


async def test_an_old_layout_moves_to_the_new_names_with_no_job_and_the_same_serial(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    await _write_old_layout(kube, await _current_hash(kube))
    new = state_of(kube)
    async with running_controller(apiserver, namespace, clock=clock):

        async def moved() -> bool:
            names = {
                s["metadata"]["name"]
                for s in (await kube.call("GET", f"/api/v1/namespaces/{kube.ns}/secrets"))["items"]
            }
            return {new, f"{new}-2"} <= names and not {"c1-state", "c1-state-2"} & names

        await eventually(moved, what="the state and its backup moved")
        await condition_is(kube, "Ready", "True", "Applied")
        state = await kube.secret(new)
        assert state["metadata"]["annotations"][ANN_SERIAL] == "3"
        assert state["data"]["terraform.tfstate"] == _tfstate(3)
        assert state["metadata"]["labels"][LABEL_KIND] == CLUSTER
        backup = await kube.secret(f"{new}-2")
        assert backup["data"]["terraform.tfstate"] == _tfstate(2)
        assert backup["metadata"]["labels"][LABEL_BACKUP_OF] == "c1"
        await clock.advance(30)
        await condition_is(kube, "Ready", "True", "Applied")
        assert await kube.jobs() == []


async def test_a_deletion_during_the_move_reads_a_state_and_destroys(
    apiserver: ApiServer, namespace: str
) -> None:
    """The object deleted before the controller starts: whichever name the pass reads, it
    finds a state, so the deletion runs a destroy (never DeletionHeld on a lost state)."""
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    await _write_old_layout(kube, await _current_hash(kube))
    finalizer = {"metadata": {"finalizers": ["captf.io/destroy"]}}
    await kube.call(
        "PATCH",
        kube.captf_path("terraformclusters", "c1"),
        finalizer,
        "application/merge-patch+json",
    )
    await kube.call("DELETE", kube.captf_path("terraformclusters", "c1"))
    async with running_controller(apiserver, namespace, clock=clock):
        destroy = await nth_job(kube, 1, "captf.io/op=destroy")
        env = {
            e["name"]: e.get("value")
            for e in destroy["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["CAPTF_STATE_SECRET"] == state_of(kube)
        assert await kube.jobs("captf.io/op=apply") == []
        cluster = await kube.cluster()
        reasons = [c.get("reason") for c in (cluster.get("status") or {}).get("conditions", [])]
        assert "DeletionHeld" not in reasons


async def test_a_secret_of_our_name_without_our_labels_is_not_a_state(
    apiserver: ApiServer, namespace: str
) -> None:
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    squatter = {
        "metadata": {"name": state_of(kube), "annotations": {ANN_SERIAL: "9"}},
        "data": {"terraform.tfstate": _tfstate(9)},
    }
    await kube.call("POST", f"/api/v1/namespaces/{kube.ns}/secrets", squatter)
    old = {
        "metadata": {"name": "c1-state", "labels": {LABEL_NAME: "c1", LABEL_KIND: "Other"}},
        "data": {"terraform.tfstate": _tfstate(8)},
    }
    await kube.call("POST", f"/api/v1/namespaces/{kube.ns}/secrets", old)
    async with running_controller(apiserver, namespace, clock=clock):
        apply = await nth_job(kube, 1)
        assert apply["metadata"]["annotations"].get("captf.io/retry") == "1"
        cluster = await kube.cluster()
        # No state read: no serial shown (the squatter's would be 9, the other kind's 8).
        assert "stateSerial" not in cluster["status"]
        assert cluster["status"]["inputsHash"]
        # Neither is moved, rewritten or deleted.
        assert (await kube.secret(state_of(kube)))["data"]["terraform.tfstate"] == _tfstate(9)
        assert (await kube.secret("c1-state"))["data"]["terraform.tfstate"] == _tfstate(8)
        assert await _secret_or_none(kube, f"{state_of(kube)}-8") is None


async def test_a_state_missing_a_part_holds_the_deletion(
    apiserver: ApiServer, namespace: str
) -> None:
    """A state laid out in parts, one part deleted by hand: the deletion is held (no
    destroy Job) and says which part is missing."""
    kube, clock = Kube(apiserver, namespace), SteppedClock()
    await kube.setup_cluster()
    body = {"version": 4, "serial": 2, "lineage": "l", "pad": os.urandom(1_500_000).hex()}
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        store = StateStore(
            TransportKube(transport, namespace),
            secret_name=state_of(kube),
            object_name="c1",
            object_kind=CLUSTER,
        )
        await store.save(None, orjson.dumps(body), await _current_hash(kube))
    state = await kube.secret(state_of(kube))
    parts = state_part_names(state_of(kube), state["metadata"]["annotations"])
    assert len(parts) >= 2
    await kube.call("DELETE", f"/api/v1/namespaces/{kube.ns}/secrets/{parts[-1]}")
    finalizer = {"metadata": {"finalizers": ["captf.io/destroy"]}}
    path = kube.captf_path("terraformclusters", "c1")
    await kube.call("PATCH", path, finalizer, "application/merge-patch+json")
    await kube.call("DELETE", path)
    async with running_controller(apiserver, namespace, clock=clock):
        held = await condition_is(kube, "Waiting", "True", "DeletionHeld")
        assert f"names part {parts[-1]}, which is missing" in held["message"]
        await clock.advance(600)
        await condition_is(kube, "Waiting", "True", "DeletionHeld")
        assert await kube.jobs("captf.io/op=destroy") == []
