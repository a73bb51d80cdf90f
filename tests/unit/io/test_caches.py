"""The controller's caches, no server: what a snapshot reads, and the Secret data fetched for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.core.basics.names import (
    ANN_RESULT,
    CAPI_API_VERSION,
    CAPI_CLUSTER,
    CLUSTER,
    LABEL_CLUSTER_NAME,
    LABEL_KIND,
    LABEL_NAME,
    POOL,
)
from controller.io.caches import Caches
from controller.io.trimming import job_fields, own_secret_fields
from runtime.cache import Store
from runtime.clock import LoopClock
from runtime.jsonobj import Json
from tests.unit.io.cache_objects import (
    NS,
    Server,
    captf,
    carrying,
    deliver,
    job,
    load,
    own,
    secret,
    snapshot,
)

# --- Secret data: fetched when it changed, only for the objects that read it --------------


async def test_secret_data_is_fetched_once_per_version(server: Server, caches: Caches) -> None:
    obj = captf(CLUSTER, "c", spec={"variablesFrom": [{"secretRef": {"name": "vars"}}]})
    path = "/api/v1/namespaces/ns/secrets/vars"
    server.objects[path] = secret("vars", 1) | {"data": {"k": "dg=="}}
    caches.secrets.store.upsert(secret("vars", 1))
    await load(caches, obj)
    await load(caches, obj)
    assert server.gets[path] == 1
    snap = snapshot(caches, obj)
    assert snap.secrets["vars"]["data"] == {"k": "dg=="}
    server.objects[path] = secret("vars", 2) | {"data": {"k": "dzI="}}
    caches.secrets.store.upsert(secret("vars", 2))
    await load(caches, obj)
    assert server.gets[path] == 2
    snap = snapshot(caches, obj)
    assert snap.secrets["vars"]["data"] == {"k": "dzI="}


async def test_a_plan_secret_is_held_as_its_keys_only(server: Server, caches: Caches) -> None:
    obj = captf(CLUSTER, "c")
    plan = job(
        obj, "c-plan-1", annotations={ANN_RESULT: '{"outcome": "succeeded", "planSecret": "p1"}'}
    )
    caches.jobs.store.upsert(job_fields(plan))
    caches.secrets.store.upsert(secret("p1"))
    server.objects["/api/v1/namespaces/ns/secrets/p1"] = secret("p1") | {"data": {"plan": "QUJD"}}
    await load(caches, obj)
    snap = snapshot(caches, obj)
    assert snap.secrets["p1"]["data"] == {"plan": ""}
    assert snap.plan_readable(snap.jobs[0])


async def test_the_secrets_a_job_carried_are_read_for_redaction(
    server: Server, caches: Caches
) -> None:
    obj = captf(CLUSTER, "c")
    caches.jobs.store.upsert(job_fields(carrying(obj, "c-inputs-1")))
    caches.secrets.store.upsert(secret("c-inputs-1"))
    path = "/api/v1/namespaces/ns/secrets/c-inputs-1"
    server.objects[path] = secret("c-inputs-1") | {"data": {"inputs.json": "e30="}}
    await load(caches, obj)
    snap = snapshot(caches, obj)
    assert snap.secrets["c-inputs-1"]["data"] == {"inputs.json": "e30="}


async def test_a_pass_reads_the_job_list_it_took_once(server: Server, caches: Caches) -> None:
    """The contents loaded and the snapshot both come from the Jobs handed to them, not
    from another look at the cache (a Job the cache no longer shows included)."""
    obj = captf(CLUSTER, "c")
    jobs = [job_fields(carrying(obj, "c-inputs-1"))]
    caches.secrets.store.upsert(secret("c-inputs-1"))
    path = "/api/v1/namespaces/ns/secrets/c-inputs-1"
    server.objects[path] = secret("c-inputs-1") | {"data": {"inputs.json": "e30="}}
    await caches.load_contents(obj, jobs)
    snap = caches.snapshot(obj, jobs)
    assert snap.jobs == tuple(jobs)
    assert snap.secrets["c-inputs-1"]["data"] == {"inputs.json": "e30="}


async def test_a_secret_captf_wrote_is_read_from_its_cache_without_a_request(
    server: Server, caches: Caches
) -> None:
    obj = captf(CLUSTER, "c")
    caches.jobs.store.upsert(job_fields(carrying(obj, "c-inputs-1")))
    inputs = own("c-inputs-1", {LABEL_NAME: "c", LABEL_KIND: CLUSTER}, {"inputs.json": "e30="})
    deliver(caches.own_secrets, "ADDED", own_secret_fields(inputs))
    state = own("c-state", {LABEL_NAME: "c", LABEL_KIND: CLUSTER}, {"s": "QQ=="})
    deliver(caches.own_secrets, "ADDED", own_secret_fields(state))
    await load(caches, obj)
    assert sum(server.gets.values()) == 0
    snap = snapshot(caches, obj)
    assert snap.secrets["c-inputs-1"]["data"] == {"inputs.json": "e30="}
    assert [s["metadata"]["name"] for s in snap.inputs_secrets()] == ["c-inputs-1"]
    assert snap.state_secret is not None


async def test_a_secret_captf_wrote_without_its_data_is_fetched_when_read(
    server: Server, caches: Caches
) -> None:
    # A state keeps no data in the cache; an object that takes variables from it
    # (nothing forbids it) has it fetched, once per version, as a user's Secret would.
    obj = captf(CLUSTER, "r", spec={"variablesFrom": [{"secretRef": {"name": "c-state"}}]})
    state = own("c-state", {LABEL_NAME: "c"}, {"s": "QQ=="})
    server.objects["/api/v1/namespaces/ns/secrets/c-state"] = state
    deliver(caches.own_secrets, "ADDED", own_secret_fields(state))
    await load(caches, obj)
    await load(caches, obj)
    assert sum(server.gets.values()) == 1
    snap = snapshot(caches, obj)
    assert snap.secrets["c-state"]["data"] == {"s": "QQ=="}


def test_a_deleted_secret_is_forgotten(server: Server, caches: Caches, woken: list[str]) -> None:
    caches.secret_data._held["ns/vars"] = ("1", {"k": "dg=="})
    deliver(caches.secrets, "ADDED", secret("vars"))
    deliver(caches.secrets, "DELETED", secret("vars", 2))
    assert caches.secret_data.data(NS, "vars") is None


# --- A snapshot's cost does not grow with its namespace -------------------------------------


class CountingStore(Store):
    """Counts every object a lookup hands out."""

    handed: int = 0

    def get(self, key: str) -> Json | None:
        found = super().get(key)
        CountingStore.handed += found is not None
        return found

    def by_index(self, index: str, value: str) -> list[Json]:
        found = super().by_index(index, value)
        CountingStore.handed += len(found)
        return found

    def __iter__(self) -> Iterator[Json]:
        items = list(super().__iter__())
        CountingStore.handed += len(items)
        return iter(items)


def populated(bystanders: int) -> tuple[Caches, Json]:
    caches = Caches(Server(), clock=LoopClock(), namespace=None)
    for informer in caches.informers():
        informer.store = CountingStore(informer.store._indexers)
    caches.secret_data.metadata = caches.secrets.store
    caches.configmap_data.metadata = caches.configmaps.store
    spec = {
        "identityRef": {"kind": "Secret", "name": "creds"},
        "source": {"configMapRef": {"name": "mod"}},
        "dependsOn": [{"kind": CLUSTER, "name": "dep"}],
    }
    owned = [{"apiVersion": CAPI_API_VERSION, "kind": CAPI_CLUSTER, "name": "c"}]
    obj = captf(CLUSTER, "c", spec=spec, ownerReferences=owned)
    member = captf(POOL, "p", labels={LABEL_CLUSTER_NAME: "c"})
    for item in (obj, captf(CLUSTER, "dep"), member):
        caches.objects[item["kind"]].store.upsert(item)
    cluster = {"metadata": {"name": "c", "namespace": NS}, "spec": {}}
    caches.capi[CAPI_CLUSTER].store.upsert(cluster)
    caches.jobs.store.upsert(job_fields(job(obj, "c-apply-1")))
    for name in ("creds", "c-state", "c-inputs-1"):
        caches.secrets.store.upsert(secret(name, labels={LABEL_NAME: "c", LABEL_KIND: CLUSTER}))
    for i in range(bystanders):
        other = captf(CLUSTER, f"o{i}", spec={"identityRef": {"kind": "Secret", "name": f"s{i}"}})
        caches.objects[CLUSTER].store.upsert(other)
        caches.jobs.store.upsert(job_fields(job(other, f"o{i}-apply-1")))
        caches.secrets.store.upsert(secret(f"s{i}"))
        labels = {LABEL_NAME: f"o{i}", LABEL_KIND: CLUSTER}
        caches.secrets.store.upsert(secret(f"o{i}-inputs-1", labels=labels))
    return caches, obj


@pytest.mark.parametrize("bystanders", [10, 2000])
def test_a_snapshot_reads_the_same_objects_whatever_the_namespace_holds(bystanders: int) -> None:
    caches, obj = populated(bystanders)
    CountingStore.handed = 0
    snap = snapshot(caches, obj)
    assert CountingStore.handed <= 12  # independent of `bystanders`
    assert sorted(snap.secrets) == ["c-inputs-1", "c-state", "creds"]
    assert [s["metadata"]["name"] for s in snap.inputs_secrets()] == ["c-inputs-1"]
    assert sorted(snap.related) == [(CAPI_CLUSTER, "c"), (CLUSTER, "dep"), (POOL, "p")]
    assert [j["metadata"]["name"] for j in snap.jobs] == ["c-apply-1"]
