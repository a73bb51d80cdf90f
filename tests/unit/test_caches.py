"""The controller's caches, no server: what is kept, what wakes what, what a snapshot reads."""

from __future__ import annotations

import base64
import copy
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import pytest

from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_INPUTS_HASH,
    ANN_RESULT,
    CLUSTER,
    FINALIZER,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_OP,
    LABEL_OUTPUTS_OF,
    LABEL_PLAN_OF,
    LABEL_RETRY_CAPPED,
    LABEL_SCOPE,
    LABEL_UID,
    MANAGED_BY,
    POOL,
    SCOPE_RUN_SLOT,
)
from controller.core.decide.snapshot import owns
from controller.core.jobs import job as job_rules
from controller.core.jobs.sensitive import job_redactor
from controller.io.caches import (
    Caches,
    job_fields,
    only_own_job_writes,
    only_own_object_writes,
    own_secret_fields,
    wire_handlers,
)
from runtime.cache import Informer, Store, Watched
from runtime.clock import LoopClock
from runtime.errors import ApiError

Json = dict[str, Any]
NS = "ns"


class Server:
    """Answers GETs of single Secrets and ConfigMaps from a dict; counts them."""

    def __init__(self) -> None:
        self.objects: dict[str, Json] = {}
        self.gets: Counter[str] = Counter()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        assert method == "GET"
        self.gets[path] += 1
        if path not in self.objects:
            raise ApiError(404, "NotFound", path)
        return copy.deepcopy(self.objects[path])

    def stream(self, path: str, *, params: Mapping[str, str], accept: str = "") -> Any:
        raise AssertionError("nothing watches in these tests")


def meta(name: str, rv: int = 1, **extra: Any) -> Json:
    return {"name": name, "namespace": NS, "resourceVersion": str(rv), "uid": f"uid-{name}"} | extra


def captf(kind: str, name: str, rv: int = 1, *, spec: Json | None = None, **extra: Any) -> Json:
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": kind,
        "metadata": meta(name, rv, **extra),
        "spec": spec or {},
    }


def secret(name: str, rv: int = 1, labels: dict[str, str] | None = None) -> Json:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta(name, rv, labels=labels or {})}


def job(owner: Json, name: str, rv: int = 1, annotations: dict[str, str] | None = None) -> Json:
    labels = {
        LABEL_KIND: owner["kind"],
        LABEL_NAME: owner["metadata"]["name"],
        LABEL_UID: owner["metadata"]["uid"],
        LABEL_OP: "apply",
    }
    container = {"name": "runner", "image": "captf-runner", "env": [{"name": "X", "value": "y"}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(name, rv, labels=labels, annotations=annotations or {}),
        "spec": {"template": {"spec": {"containers": [container]}}},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


def carrying(owner: Json, inputs_secret: str) -> Json:
    """An apply Job of `owner` whose runner read the inputs Secret `inputs_secret`."""
    carrier = job(owner, f"{owner['metadata']['name']}-apply-1")
    env = carrier["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "CAPTF_INPUTS_SECRET", "value": inputs_secret})
    return carrier


def deliver(informer: Informer, kind: str, obj: Json) -> None:
    """One watch event through the informer, as its reflector would hand it over."""
    informer._apply(Watched(kind, obj, obj["metadata"]["resourceVersion"]))


@pytest.fixture
def server() -> Server:
    return Server()


@pytest.fixture
def caches(server: Server) -> Caches:
    return Caches(server, clock=LoopClock(), namespace=None)


@pytest.fixture
def woken(caches: Caches) -> list[str]:
    keys: list[str] = []
    wire_handlers(caches, keys.append)
    return keys


# --- What an event whose only change is the controller's own write does --------------------

BASE = captf(CLUSTER, "c", spec={"x": 1}, finalizers=[FINALIZER], labels={"team": "a"})


def changed(path: tuple[str, ...], value: Any) -> Json:
    obj = copy.deepcopy(BASE)
    target = obj
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value
    obj["metadata"]["resourceVersion"] = "2"
    return obj


@pytest.mark.parametrize(
    ("path", "value", "own"),
    [
        (("status",), {"conditions": [{"type": "Ready", "status": "True"}]}, True),
        (("metadata", "finalizers"), [], True),
        (("metadata", "labels"), {"team": "a", LABEL_RETRY_CAPPED: "true"}, True),
        (("metadata", "generation"), 2, True),
        (("spec",), {"x": 2}, False),
        (("metadata", "labels"), {"team": "b"}, False),
        (("metadata", "annotations"), {"captf.io/approve": "c-plan-1"}, False),
        (("metadata", "deletionTimestamp"), "2026-01-01T00:00:00Z", False),
        (("metadata", "finalizers"), [FINALIZER, "other.io/keep"], False),
    ],
)
def test_only_the_controllers_own_object_writes_are_ignored(
    path: tuple[str, ...], value: Any, own: bool
) -> None:
    assert only_own_object_writes(BASE, changed(path, value)) is own


def test_adds_and_deletes_are_never_own_writes() -> None:
    assert not only_own_object_writes(None, BASE)
    assert not only_own_object_writes(BASE, None)


def test_a_job_update_that_only_accounts_it_is_ignored() -> None:
    owner = captf(CLUSTER, "c")
    before = job(owner, "c-apply-1", 1, {ANN_RESULT: "{}"})
    accounted = job(owner, "c-apply-1", 2, {ANN_RESULT: "{}", ANN_ACCOUNTED: "true"})
    finished = copy.deepcopy(before) | {"status": {"failed": 1}}
    assert only_own_job_writes(before, accounted)
    assert not only_own_job_writes(before, finished)
    assert not only_own_job_writes(None, before)


def test_the_objects_own_status_write_does_not_wake_it(caches: Caches, woken: list[str]) -> None:
    informer = caches.objects[CLUSTER]
    deliver(informer, "ADDED", copy.deepcopy(BASE))
    deliver(informer, "MODIFIED", changed(("status",), {"next": {"reason": "Idle"}}))
    assert woken == [f"{CLUSTER}/{NS}/c"]  # the add only
    deliver(informer, "MODIFIED", changed(("spec",), {"x": 3}) | {"metadata": meta("c", 3)})
    assert woken == [f"{CLUSTER}/{NS}/c"] * 2


# --- What a Job keeps once cached -----------------------------------------------------------


def test_a_cached_job_keeps_what_the_rules_read_and_drops_its_pod_template() -> None:
    owner = captf(CLUSTER, "c")
    result = '{"outcome": "failed", "message": "s3cr3t and hush leaked"}'
    full = job(owner, "c-apply-1", annotations={ANN_RESULT: result, ANN_INPUTS_HASH: "h1"})
    runner = full["spec"]["template"]["spec"]["containers"][0]
    runner["env"] += [
        {"name": "CAPTF_INPUTS_SECRET", "value": "c-inputs-1"},
        {"name": "CAPTF_SECRET_VARIABLES", "value": "password"},
    ]
    runner["envFrom"] = [{"secretRef": {"name": "creds"}}]
    kept = job_fields(copy.deepcopy(full))
    assert kept["spec"]["template"]["spec"]["containers"] == [
        {
            "env": [
                {"name": "CAPTF_INPUTS_SECRET", "value": "c-inputs-1"},
                {"name": "CAPTF_SECRET_VARIABLES", "value": "password"},
            ],
            "envFrom": [{"secretRef": {"name": "creds"}}],
        }
    ]
    inputs = '{"variables": {"password": "hush"}}'
    secrets = {
        "c-inputs-1": {"data": {"inputs.json": base64.b64encode(inputs.encode()).decode()}},
        "creds": {"data": {"TOKEN": base64.b64encode(b"s3cr3t").decode()}},
    }
    message = "tofu said s3cr3t and hush"
    redacted = job_redactor(full, secrets).text(message)
    assert "s3cr3t" not in redacted
    assert job_redactor(kept, secrets).text(message) == redacted
    for read in (job_rules.op_of, job_rules.seq_of, job_rules.result, job_rules.inputs_hash_of):
        assert read(kept) == read(full)
    assert job_rules.classify(kept) == job_rules.classify(full)
    assert job_rules.finished_at(kept) == job_rules.finished_at(full)


def test_a_job_without_the_hash_annotation_keeps_the_runners_hash_variable() -> None:
    full = job(captf(CLUSTER, "c"), "c-apply-1")
    env = full["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "CAPTF_INPUTS_HASH", "value": "h2"})
    kept = job_fields(copy.deepcopy(full))
    assert job_rules.inputs_hash_of(kept) == "h2"
    assert kept["spec"]["template"]["spec"]["containers"] == [
        {"env": [{"name": "CAPTF_INPUTS_HASH", "value": "h2"}], "envFrom": []}
    ]


def test_a_cached_job_drops_what_no_rule_reads() -> None:
    owner = captf(CLUSTER, "c")
    full = job(owner, "c-apply-1", annotations={ANN_INPUTS_HASH: "h1"})
    meta = full["metadata"]
    meta["labels"] |= {
        "batch.kubernetes.io/controller-uid": "j-uid",
        "batch.kubernetes.io/job-name": "c-apply-1",
        "controller-uid": "j-uid",
        "job-name": "c-apply-1",
    }
    meta["ownerReferences"] = [
        {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": CLUSTER,
            "name": "c",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    at = "2026-11-30T12:00:00Z"
    full["status"] = {
        "startTime": at,
        "completionTime": at,
        "succeeded": 1,
        "ready": 0,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": at},
            {"type": "Complete", "status": "True", "message": "done", "lastTransitionTime": at},
        ],
    }
    env = full["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "CAPTF_INPUTS_HASH", "value": "h1"})
    kept = job_fields(copy.deepcopy(full))
    assert set(kept["metadata"]["labels"]) == {LABEL_KIND, LABEL_NAME, LABEL_UID, LABEL_OP}
    assert [ref.get("blockOwnerDeletion") for ref in kept["metadata"]["ownerReferences"]] == [None]
    assert kept["status"]["conditions"] == [
        {"type": "Complete", "status": "True", "lastTransitionTime": at}
    ]
    assert "ready" not in kept["status"]
    # The annotation records the hash, so the runner's variable is not kept beside it.
    assert "spec" not in kept
    for read in (job_rules.inputs_hash_of, job_rules.finished_at, job_rules.classify):
        assert read(kept) == read(full)
    assert owns(owner, kept)
    assert owns(owner, full)


def test_the_jobs_of_one_object_share_the_strings_they_repeat() -> None:
    """Decoded apart, as a watch decodes them: equal strings are distinct objects until
    the cache interns them (a Job's owner uid, kind and inputs hash; equal times)."""
    owner = captf(CLUSTER, "c")
    at = "2026-11-30T12:00:00Z"
    store = Store()
    for seq in (1, 2):
        one = job(owner, f"c-apply-{seq}", annotations={ANN_INPUTS_HASH: "ab" * 32})
        one["status"] = {
            "completionTime": at,
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": at}],
        }
        store.upsert(job_fields(orjson.loads(orjson.dumps(one))))
    first, second = (store.get(f"ns/c-apply-{seq}") for seq in (1, 2))
    assert first is not None
    assert second is not None
    assert first["metadata"]["labels"][LABEL_UID] is second["metadata"]["labels"][LABEL_UID]
    assert first["metadata"]["labels"][LABEL_KIND] is second["metadata"]["labels"][LABEL_KIND]
    hashes = [j["metadata"]["annotations"][ANN_INPUTS_HASH] for j in (first, second)]
    assert hashes[0] is hashes[1]
    status = first["status"]
    assert status["conditions"][0]["lastTransitionTime"] is status["completionTime"]


# --- What wakes what ------------------------------------------------------------------------


def test_a_secret_wakes_the_objects_that_read_it_and_its_owner_only(
    caches: Caches, woken: list[str]
) -> None:
    reader = captf(CLUSTER, "reader", spec={"credentialsRef": {"name": "creds"}})
    owner = captf(POOL, "owner", spec={"clusterRef": {"name": "reader"}})
    bystander = captf(CLUSTER, "bystander")
    for obj in (reader, owner, bystander):
        caches.objects[obj["kind"]].store.upsert(obj)
    deliver(caches.secrets, "ADDED", secret("creds"))
    deliver(caches.secrets, "ADDED", secret("owner-inputs-1", labels={LABEL_NAME: "owner"}))
    deliver(caches.secrets, "ADDED", secret("unrelated"))
    deliver(caches.secrets, "ADDED", secret("bystander-state"))
    assert woken == [
        f"{CLUSTER}/{NS}/reader",
        f"{POOL}/{NS}/owner",
        f"{CLUSTER}/{NS}/bystander",
    ]


def test_readiness_wakes_members_and_dependants_not_the_namespace(
    caches: Caches, woken: list[str]
) -> None:
    cluster = captf(CLUSTER, "c")
    member = captf(POOL, "p", spec={"clusterRef": {"name": "c"}})
    dependant = captf(CLUSTER, "d", spec={"dependsOn": [{"kind": CLUSTER, "name": "c"}]})
    others = [captf(CLUSTER, f"x{i}") for i in range(5)]
    for obj in (cluster, member, dependant, *others):
        caches.objects[obj["kind"]].store.upsert(obj)
    ready = copy.deepcopy(cluster)
    ready["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    ready["metadata"]["resourceVersion"] = "2"
    deliver(caches.objects[CLUSTER], "MODIFIED", ready)
    assert sorted(woken) == sorted([f"{CLUSTER}/{NS}/d", f"{POOL}/{NS}/p"])


def test_a_freed_lease_wakes_only_the_objects_waiting_for_one(
    caches: Caches, woken: list[str]
) -> None:
    waiting = captf(CLUSTER, "w") | {"status": {"next": {"reason": "WaitingForRunLease"}}}
    caches.objects[CLUSTER].store.upsert(waiting)
    caches.objects[CLUSTER].store.upsert(captf(CLUSTER, "idle"))
    lease = {
        "metadata": meta("captf-run-slot-0", 1, labels={LABEL_SCOPE: SCOPE_RUN_SLOT}),
        "spec": {"holderIdentity": "job-1"},
    }
    caches.leases.store.upsert(copy.deepcopy(lease))
    lease["spec"] = {}
    lease["metadata"]["resourceVersion"] = "2"
    deliver(caches.leases, "MODIFIED", lease)
    assert woken == [f"{CLUSTER}/{NS}/w"]


# --- Secret data: fetched when it changed, only for the objects that read it --------------


async def test_secret_data_is_fetched_once_per_version(server: Server, caches: Caches) -> None:
    obj = captf(CLUSTER, "c", spec={"variablesFrom": [{"secretRef": {"name": "vars"}}]})
    path = "/api/v1/namespaces/ns/secrets/vars"
    server.objects[path] = secret("vars", 1) | {"data": {"k": "dg=="}}
    caches.secrets.store.upsert(secret("vars", 1))
    await caches.load_contents(obj)
    await caches.load_contents(obj)
    assert server.gets[path] == 1
    snap = caches.snapshot(obj, pending_jobs=frozenset(), max_concurrent_runs=1)
    assert snap.secrets["vars"]["data"] == {"k": "dg=="}
    server.objects[path] = secret("vars", 2) | {"data": {"k": "dzI="}}
    caches.secrets.store.upsert(secret("vars", 2))
    await caches.load_contents(obj)
    assert server.gets[path] == 2
    snap = caches.snapshot(obj, pending_jobs=frozenset(), max_concurrent_runs=1)
    assert snap.secrets["vars"]["data"] == {"k": "dzI="}


async def test_a_plan_secret_is_held_as_its_keys_only(server: Server, caches: Caches) -> None:
    obj = captf(CLUSTER, "c")
    plan = job(
        obj, "c-plan-1", annotations={ANN_RESULT: '{"outcome": "succeeded", "planSecret": "p1"}'}
    )
    caches.jobs.store.upsert(job_fields(plan))
    caches.secrets.store.upsert(secret("p1"))
    server.objects["/api/v1/namespaces/ns/secrets/p1"] = secret("p1") | {"data": {"plan": "QUJD"}}
    await caches.load_contents(obj)
    snap = caches.snapshot(obj, pending_jobs=frozenset(), max_concurrent_runs=1)
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
    await caches.load_contents(obj)
    snap = caches.snapshot(obj, pending_jobs=frozenset(), max_concurrent_runs=1)
    assert snap.secrets["c-inputs-1"]["data"] == {"inputs.json": "e30="}


def own(name: str, labels: dict[str, str], data: dict[str, str]) -> Json:
    """A Secret as CAPTF writes it: labelled, with its data."""
    return secret(name, labels=labels | MANAGED_BY) | {"data": data}


async def test_a_secret_captf_wrote_is_read_from_its_cache_without_a_request(
    server: Server, caches: Caches
) -> None:
    obj = captf(CLUSTER, "c")
    caches.jobs.store.upsert(job_fields(carrying(obj, "c-inputs-1")))
    inputs = own("c-inputs-1", {LABEL_NAME: "c"}, {"inputs.json": "e30="})
    deliver(caches.own_secrets, "ADDED", own_secret_fields(inputs))
    deliver(caches.own_secrets, "ADDED", own_secret_fields(own("c-state", {}, {"s": "QQ=="})))
    await caches.load_contents(obj)
    assert sum(server.gets.values()) == 0
    snap = caches.snapshot(obj, pending_jobs=frozenset(), max_concurrent_runs=1)
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
    await caches.load_contents(obj)
    await caches.load_contents(obj)
    assert sum(server.gets.values()) == 1
    snap = caches.snapshot(obj, pending_jobs=frozenset(), max_concurrent_runs=1)
    assert snap.secrets["c-state"]["data"] == {"s": "QQ=="}


@pytest.mark.parametrize(
    ("name", "labels", "kept"),
    [
        ("c-inputs-0123abcd", {LABEL_NAME: "c"}, {"k": "dg=="}),
        ("p1", {LABEL_PLAN_OF: "c"}, {"k": ""}),
        ("c-state", {LABEL_NAME: "c"}, None),
        ("c-inputs-state-3", {LABEL_BACKUP_OF: "c-inputs"}, None),
        ("c-outputs", {LABEL_OUTPUTS_OF: "c"}, {"k": "dg=="}),
    ],
)
def test_what_is_cached_of_a_secret_captf_wrote(
    name: str, labels: dict[str, str], kept: dict[str, str] | None
) -> None:
    cached = own_secret_fields(own(name, labels, {"k": "dg=="}))
    assert cached.get("data") == kept
    assert cached["metadata"]["labels"] == labels | MANAGED_BY


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
        "credentialsRef": {"name": "creds"},
        "module": {"configMapRef": {"name": "mod"}},
        "dependsOn": [{"kind": CLUSTER, "name": "dep"}],
    }
    obj = captf(CLUSTER, "c", spec=spec)
    for item in (obj, captf(CLUSTER, "dep"), captf(POOL, "p", spec={"clusterRef": {"name": "c"}})):
        caches.objects[item["kind"]].store.upsert(item)
    caches.jobs.store.upsert(job_fields(job(obj, "c-apply-1")))
    for name in ("creds", "c-state", "c-inputs-1"):
        caches.secrets.store.upsert(secret(name, labels={LABEL_NAME: "c"}))
    for i in range(bystanders):
        other = captf(CLUSTER, f"o{i}", spec={"credentialsRef": {"name": f"s{i}"}})
        caches.objects[CLUSTER].store.upsert(other)
        caches.jobs.store.upsert(job_fields(job(other, f"o{i}-apply-1")))
        caches.secrets.store.upsert(secret(f"s{i}"))
        caches.secrets.store.upsert(secret(f"o{i}-inputs-1", labels={LABEL_NAME: f"o{i}"}))
    return caches, obj


@pytest.mark.parametrize("bystanders", [10, 2000])
def test_a_snapshot_reads_the_same_objects_whatever_the_namespace_holds(bystanders: int) -> None:
    caches, obj = populated(bystanders)
    CountingStore.handed = 0
    snap = caches.snapshot(obj, pending_jobs=frozenset(), max_concurrent_runs=10)
    assert CountingStore.handed <= 12  # independent of `bystanders`
    assert sorted(snap.secrets) == ["c-inputs-1", "c-state", "creds"]
    assert [s["metadata"]["name"] for s in snap.inputs_secrets()] == ["c-inputs-1"]
    assert sorted(snap.related) == [(CLUSTER, "dep"), (POOL, "p")]
    assert [j["metadata"]["name"] for j in snap.jobs] == ["c-apply-1"]
