"""A deletion held on a lost state, and the two ways out (a restore then the destroy, an
abandon by uid), on the real API server with the controller running (docs/deletion.md)."""

from __future__ import annotations

import pytest

from controller.core.basics.names import CLUSTER, inputs_secret_prefix
from runtime.envtest import ApiServer, RequestFailed
from tests.kube.harness import (
    Kube,
    condition_is,
    controller_on,
    events_of,
    eventually,
    new_job,
    nth_job,
    state_of,
    succeed_apply,
    write_state,
)

pytestmark = pytest.mark.kube
CLUSTERS = "terraformclusters"


async def _applied_then_state_lost(kube: Kube, clock: object, *, backup: bool) -> str:
    """c1 applied (serial 1), its inputs Secret marked, optionally a backup of serial 1,
    then its state Secret deleted by hand and the cluster deleted; returns its uid."""
    apply = await nth_job(kube, 1)
    await succeed_apply(kube, apply, serial=1, at=clock.now())  # type: ignore[attr-defined]
    await condition_is(kube, "Ready", "True", "Applied")
    inputs = apply["metadata"]["annotations"]["captf.io/inputs-hash"][:8]

    async def marked() -> bool:
        named = f"{inputs_secret_prefix(kube.ns, CLUSTER, 'c1')}{inputs}"
        notes = (await kube.secret(named))["metadata"].get("annotations") or {}
        return notes.get("captf.io/applied") == "true"

    await eventually(marked, what="the inputs Secret marked captf.io/applied")
    if backup:
        body = {
            "metadata": {
                "name": f"{state_of(kube)}-1",
                "labels": {
                    "captf.io/state-backup-of": "c1",
                    "captf.io/kind": "TerraformCluster",
                    "captf.io/name": "c1",
                    "captf.io/managed-by": "captf",
                },
                "annotations": {"captf.io/serial": "1"},
            },
            "stringData": {"terraform.tfstate": '{"serial": 1}'},
        }
        await kube.call("POST", f"/api/v1/namespaces/{kube.ns}/secrets", body)
    await kube.call("DELETE", f"/api/v1/namespaces/{kube.ns}/secrets/{state_of(kube)}")
    await kube.call("DELETE", kube.captf_path(CLUSTERS, "c1"))
    return str((await kube.cluster())["metadata"]["uid"])


async def _gone(kube: Kube) -> bool:
    try:
        await kube.cluster()
    except RequestFailed as err:
        return err.status == 404
    return False


async def test_a_lost_state_holds_the_deletion_and_says_how_to_leave_it(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        uid = await _applied_then_state_lost(kube, clock, backup=False)
        held = await condition_is(kube, "Waiting", "True", "DeletionHeld")
        assert f"state Secret {state_of(kube)} is gone" in held["message"]
        assert f"captf.io/abandon={uid}" in held["message"]
        await clock.advance(600)
        await condition_is(kube, "Waiting", "True", "DeletionHeld")
        assert await kube.jobs("captf.io/op=destroy") == []
        assert "captf.io/destroy" in (await kube.cluster())["metadata"]["finalizers"]


async def test_an_unreadable_state_holds_the_deletion(apiserver: ApiServer, namespace: str) -> None:
    # The cache keeps the state's key list: a state rewritten without terraform.tfstate
    # is seen as unreadable without its values ever being read.
    async with controller_on(apiserver, namespace) as (kube, clock):
        apply = await nth_job(kube, 1)
        await succeed_apply(kube, apply, serial=1, at=clock.now())
        await condition_is(kube, "Ready", "True", "Applied")
        path = f"/api/v1/namespaces/{kube.ns}/secrets/{state_of(kube)}"
        patch = {"data": {"terraform.tfstate": None, "tfstate.json": "e30="}}
        await kube.call("PATCH", path, patch, "application/merge-patch+json")
        await kube.call("DELETE", kube.captf_path(CLUSTERS, "c1"))
        held = await condition_is(kube, "Waiting", "True", "DeletionHeld")
        assert f"state Secret {state_of(kube)} has no terraform.tfstate key" in held["message"]
        await clock.advance(600)
        await condition_is(kube, "Waiting", "True", "DeletionHeld")
        assert await kube.jobs("captf.io/op=destroy") == []
        assert "captf.io/destroy" in (await kube.cluster())["metadata"]["finalizers"]


async def test_a_restore_ends_the_hold_and_the_destroy_follows(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        await _applied_then_state_lost(kube, clock, backup=True)
        held = await condition_is(kube, "Waiting", "True", "DeletionHeld")
        assert "annotate captf.io/restore-serial=1, the newest" in held["message"]
        await kube.annotate(CLUSTERS, "c1", {"captf.io/restore-serial": "1"})
        restore = await nth_job(kube, 1, "captf.io/op=restore")
        await write_state(kube, restore, serial=1)  # the runner writes the backup back
        await kube.finish(restore, "succeeded", at=clock.now(), result={"stateSerial": 1})
        destroy = await new_job(kube, selector="captf.io/op=destroy")
        await kube.finish(destroy, "succeeded", at=clock.now(), result={"stateSerial": 2})
        await eventually(lambda: _gone(kube), what="the object gone after its destroy")


async def test_an_abandon_by_uid_removes_the_finalizer_with_a_warning(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        uid = await _applied_then_state_lost(kube, clock, backup=True)
        await condition_is(kube, "Waiting", "True", "DeletionHeld")
        await kube.annotate(CLUSTERS, "c1", {"captf.io/abandon": "not-the-uid"})
        wrong = await condition_is(kube, "Waiting", "True", "DeletionHeld")
        await eventually(
            lambda: _says(kube, "is not this object's uid"), what="the wrong value named"
        )
        assert wrong["reason"] == "DeletionHeld"
        await kube.annotate(CLUSTERS, "c1", {"captf.io/abandon": uid})
        await eventually(lambda: _gone(kube), what="the object gone without a destroy")
        [warning] = await events_of(kube, "AbandonedInfrastructure")
        assert warning["type"] == "Warning"
        assert "keeps running, untracked" in warning["message"]
        assert await kube.jobs("captf.io/op=destroy") == []


async def _says(kube: Kube, text: str) -> bool:
    conditions = (await kube.cluster()).get("status", {}).get("conditions") or []
    return any(text in c.get("message", "") for c in conditions if c["type"] == "Waiting")


async def test_a_deletion_before_any_apply_needs_no_job(
    apiserver: ApiServer, namespace: str
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        apply = await nth_job(kube, 1)
        await kube.finish(apply, "failed", at=clock.now())  # failed before writing a state
        await kube.call("DELETE", kube.captf_path(CLUSTERS, "c1"))
        await eventually(lambda: _gone(kube), what="the object gone at once")
        assert await kube.jobs("captf.io/op=destroy") == []
