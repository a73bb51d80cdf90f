"""Who wakes whom: the controller's own writes wake no one, and every other change wakes
the objects it concerns, found through an index."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_RESULT,
    CAPI_API_VERSION,
    CAPI_CLUSTER,
    CLUSTER,
    FINALIZER,
    LABEL_CLUSTER_NAME,
    LABEL_IDENTITY_MIRROR,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_RETRY_CAPPED,
    LABEL_SCOPE,
    MANAGED_BY,
    POOL,
    SCOPE_RUN_SLOT,
    state_secret_name,
)
from controller.io.caches import Caches
from controller.io.handlers import plan_wakes, pod_wakes
from controller.io.predicates import job_news, only_own_object_writes
from runtime.jsonobj import Json
from tests.unit.io.cache_objects import (
    NS,
    captf,
    deliver,
    job,
    meta,
    secret,
)

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
        (("metadata", "annotations"), {"example.com/owner": "team-a"}, False),
        (("metadata", "deletionTimestamp"), "2026-01-01T00:00:00Z", False),
        (("metadata", "finalizers"), [FINALIZER, "other.io/keep"], False),
        (("metadata", "ownerReferences"), [{"kind": "Machine", "name": "m", "uid": "u"}], False),
    ],
)
def test_only_the_controllers_own_object_writes_are_ignored(
    path: tuple[str, ...], value: Any, own: bool
) -> None:
    assert only_own_object_writes(BASE, changed(path, value)) is own


def test_adds_and_deletes_are_never_own_writes() -> None:
    assert not only_own_object_writes(None, BASE)
    assert not only_own_object_writes(BASE, None)


def _running(owner: Json, rv: int, status: Json, notes: dict[str, str] | None = None) -> Json:
    found = job(owner, "c-apply-1", rv, notes)
    return found | {"status": status}


COMPLETE = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}


@pytest.mark.parametrize(
    ("before", "after", "news"),
    [
        # the controller's own marks, in the pass that accounts the Job
        ((COMPLETE, {}), (COMPLETE, {ANN_RESULT: "{}"}), False),
        ((COMPLETE, {ANN_RESULT: "{}"}), (COMPLETE, {ANN_RESULT: "{}", ANN_ACCOUNTED: "t"}), False),
        # a running Job's progress
        (({}, {}), ({"startTime": "2026-01-01T00:00:00Z", "active": 1}, {}), False),
        (({"active": 1}, {}), ({"active": 0, "succeeded": 1}, {}), False),
        # its end, and anyone else's mark
        (({"active": 1}, {}), (COMPLETE, {}), True),
        (({"active": 1}, {}), ({"conditions": [{"type": "Failed", "status": "True"}]}, {}), True),
        (({"active": 1}, {}), ({"active": 1}, {"example.com/note": "x"}), True),
    ],
)
def test_a_job_wakes_its_object_when_it_ends_not_on_its_progress_or_our_marks(
    before: tuple[Json, dict[str, str]], after: tuple[Json, dict[str, str]], news: bool
) -> None:
    owner = captf(CLUSTER, "c")
    old, new = _running(owner, 1, *before), _running(owner, 2, *after)
    assert job_news(old, new) is news


def test_a_job_coming_or_going_is_news() -> None:
    found = job(captf(CLUSTER, "c"), "c-apply-1")
    assert job_news(None, found)
    assert job_news(found, None)


def test_the_objects_own_status_write_does_not_wake_it(caches: Caches, woken: list[str]) -> None:
    informer = caches.objects[CLUSTER]
    deliver(informer, "ADDED", copy.deepcopy(BASE))
    deliver(informer, "MODIFIED", changed(("status",), {"next": {"reason": "Idle"}}))
    assert woken == [f"{CLUSTER}/{NS}/c"]  # the add only
    deliver(informer, "MODIFIED", changed(("spec",), {"x": 3}) | {"metadata": meta("c", 3)})
    assert woken == [f"{CLUSTER}/{NS}/c"] * 2


# --- What wakes what ------------------------------------------------------------------------


def test_a_secret_wakes_the_objects_that_read_it_and_its_owner_only(
    caches: Caches, woken: list[str]
) -> None:
    reader = captf(CLUSTER, "reader", spec={"identityRef": {"kind": "Secret", "name": "creds"}})
    owner = captf(POOL, "owner", labels={LABEL_CLUSTER_NAME: "reader"})
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
    owned = [{"apiVersion": CAPI_API_VERSION, "kind": CAPI_CLUSTER, "name": "c"}]
    cluster = captf(CLUSTER, "c", ownerReferences=owned)
    member = captf(POOL, "p", labels={LABEL_CLUSTER_NAME: "c"})
    dependant = captf(CLUSTER, "d", spec={"dependsOn": [{"kind": CLUSTER, "name": "c"}]})
    others = [captf(CLUSTER, f"x{i}") for i in range(5)]
    for obj in (cluster, member, dependant, *others):
        caches.objects[obj["kind"]].store.upsert(obj)
    ready = copy.deepcopy(cluster)
    ready["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    ready["metadata"]["resourceVersion"] = "2"
    deliver(caches.objects[CLUSTER], "MODIFIED", ready)
    assert sorted(woken) == sorted([f"{CLUSTER}/{NS}/d", f"{POOL}/{NS}/p"])


READY = {"type": "Ready", "status": "True"}


@pytest.mark.parametrize(
    ("cluster_waits", "change", "wakes_cluster"),
    [
        ("", {"conditions": [{"type": "Ready", "status": "True"}]}, False),
        ("", {"activeJob": "p-apply-1"}, False),
        ("WaitingForMachineOperations", {"activeJob": "p-apply-1"}, True),
        (
            "WaitingForMachineOperations",
            {"conditions": [{"type": "Ready", "status": "True"}]},
            False,
        ),
    ],
)
def test_a_member_wakes_its_cluster_only_when_it_waits_for_the_members_job(
    caches: Caches, woken: list[str], cluster_waits: str, change: Json, wakes_cluster: bool
) -> None:
    """The TerraformCluster reads its members' Jobs (while it waits for a Lease) and their
    existence (while deleted), never their Ready."""
    owned = [{"apiVersion": CAPI_API_VERSION, "kind": CAPI_CLUSTER, "name": "c"}]
    status = {"next": {"reason": cluster_waits}} if cluster_waits else {}
    cluster = captf(CLUSTER, "c", ownerReferences=owned) | {"status": status}
    member = captf(POOL, "p", labels={LABEL_CLUSTER_NAME: "c"})
    infra = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": CLUSTER, "name": "c"}
    capi = {"kind": CAPI_CLUSTER, "metadata": meta("c"), "spec": {"infrastructureRef": infra}}
    caches.capi[CAPI_CLUSTER].store.upsert(capi)
    caches.objects[CLUSTER].store.upsert(cluster)
    caches.objects[POOL].store.upsert(copy.deepcopy(member))
    changed = member | {"status": change}
    changed["metadata"] = changed["metadata"] | {"resourceVersion": "2"}
    deliver(caches.objects[POOL], "MODIFIED", changed)
    assert woken == ([f"{CLUSTER}/{NS}/c"] if wakes_cluster else [])
    woken.clear()
    deliver(caches.objects[POOL], "DELETED", changed)  # a deleting cluster waits for it
    assert f"{CLUSTER}/{NS}/c" in woken


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


def _waiting_since(name: str, reason: str, since: str) -> Json:
    waiting = {"type": "Waiting", "status": "True", "lastTransitionTime": since}
    status = {"next": {"reason": reason}, "conditions": [waiting]}
    return captf(CLUSTER, name) | {"status": status}


def _freed(name: str, labels: dict[str, str]) -> tuple[Json, Json]:
    held = {"metadata": meta(name, 1, labels=labels), "spec": {"holderIdentity": "job-1"}}
    freed = copy.deepcopy(held)
    freed["spec"] = {}
    freed["metadata"]["resourceVersion"] = "2"
    return held, freed


def test_a_freed_run_slot_wakes_the_two_longest_waiting_and_an_operation_only_operation_waiters(
    caches: Caches, woken: list[str]
) -> None:
    """Not every waiter: each release would cost a pass per waiting object (issue 31)."""
    for i, since in enumerate(["12:00:05", "12:00:01", "12:00:09", "12:00:03", "12:00:07"]):
        obj = _waiting_since(f"w{i}", "WaitingForRunLease", f"2026-06-01T{since}Z")
        caches.objects[CLUSTER].store.upsert(obj)
    operation = _waiting_since("op", "WaitingForClusterOperation", "2026-06-01T12:00:00Z")
    caches.objects[CLUSTER].store.upsert(operation)
    held, freed = _freed("captf-run-slot-3", {LABEL_SCOPE: SCOPE_RUN_SLOT})
    caches.leases.store.upsert(held)
    deliver(caches.leases, "MODIFIED", freed)
    assert sorted(woken) == [f"{CLUSTER}/{NS}/{name}" for name in ("op", "w1", "w3")]

    woken.clear()
    held, freed = _freed("captf-op-terraformcluster-c", {})
    caches.leases.store.upsert(held)
    deliver(caches.leases, "MODIFIED", freed)
    # an operation Lease: the operation waiters only (a Job's end frees its slot too)
    assert woken == [f"{CLUSTER}/{NS}/op"]


@pytest.mark.parametrize(
    ("changes", "woken_names"),
    [
        # Changes wait: they are woken, not the background Jobs that waited longer.
        (["c1", "c2"], ["c1", "c2"]),
        # One change waits: it, and the background Job that waited longest.
        (["c1"], ["b0", "c1"]),
        # None: the two background Jobs that waited longest (issue 39).
        ([], ["b0", "b1"]),
    ],
)
def test_a_freed_run_slot_wakes_waiting_changes_before_background(
    caches: Caches, woken: list[str], changes: list[str], woken_names: list[str]
) -> None:
    for i in range(3):
        obj = _waiting_since(f"b{i}", "WaitingForBackgroundBudget", f"2026-06-01T12:00:0{i}Z")
        caches.objects[CLUSTER].store.upsert(obj)
    for i, name in enumerate(changes):
        obj = _waiting_since(name, "WaitingForRunLease", f"2026-06-01T12:00:5{i}Z")
        caches.objects[CLUSTER].store.upsert(obj)
    held, freed = _freed("captf-run-slot-3", {LABEL_SCOPE: SCOPE_RUN_SLOT})
    caches.leases.store.upsert(held)
    deliver(caches.leases, "MODIFIED", freed)
    assert sorted(woken) == [f"{CLUSTER}/{NS}/{name}" for name in woken_names]
    woken.clear()
    # An operation Lease wakes none of them: they wait for a slot or a budget.
    held, freed = _freed("captf-op-terraformcluster-c", {})
    caches.leases.store.upsert(held)
    deliver(caches.leases, "MODIFIED", freed)
    assert woken == []


# --- Identities -----------------------------------------------------------------------------

ON_AWS: Json = {"identityRef": {"kind": "TerraformClusterIdentity", "name": "aws"}}


def _identity(rv: int = 1, allowed: Json | None = None, status: Json | None = None) -> Json:
    found: Json = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformClusterIdentity",
        "metadata": {"name": "aws", "resourceVersion": str(rv)},
        "spec": {
            "secretRef": {"namespace": "home", "name": "aws"},
            "allowedNamespaces": allowed or {"list": [NS]},
        },
    }
    return found | ({"status": status} if status else {})


def _namespace(rv: int, labels: dict[str, str]) -> Json:
    return {"metadata": {"name": NS, "resourceVersion": str(rv), "labels": labels}}


@pytest.fixture
def users(caches: Caches) -> list[Json]:
    """A cluster naming identity aws, its machine inheriting it, and a bystander."""
    owner = {"apiVersion": CAPI_API_VERSION, "kind": CAPI_CLUSTER, "name": "c1", "uid": "u"}
    cluster = captf(CLUSTER, "c1", spec=ON_AWS, ownerReferences=[owner])
    member = captf(POOL, "p1", labels={LABEL_CLUSTER_NAME: "c1"})
    bystander = captf(CLUSTER, "other", spec={"identityRef": {"kind": "Secret", "name": "creds"}})
    for obj in (cluster, member, bystander):
        caches.objects[obj["kind"]].store.upsert(obj)
    return [cluster, member]


IDENTITY_KEY = "TerraformClusterIdentity//aws"
USER_KEYS = [f"{CLUSTER}/{NS}/c1", f"{POOL}/{NS}/p1"]


@pytest.mark.usefixtures("users")
def test_an_identity_wakes_itself_and_its_users_when_its_spec_changes(
    caches: Caches, woken: list[str]
) -> None:
    deliver(caches.identities, "ADDED", _identity())
    assert woken == [IDENTITY_KEY, *USER_KEYS]
    woken.clear()
    deliver(caches.identities, "MODIFIED", _identity(2, status={"namespaces": [NS]}))
    assert woken == [IDENTITY_KEY]  # its own status write: the users read nothing new
    woken.clear()
    deliver(caches.identities, "MODIFIED", _identity(3, allowed={"list": []}))
    assert woken == [IDENTITY_KEY, *USER_KEYS]


@pytest.mark.usefixtures("users")
def test_a_namespace_wakes_identities_and_their_users_there_when_its_labels_change(
    caches: Caches, woken: list[str]
) -> None:
    caches.identities.store.upsert(_identity())
    deliver(caches.namespaces, "ADDED", _namespace(1, {"team": "a"}))
    woken.clear()
    deliver(caches.namespaces, "MODIFIED", _namespace(2, {"team": "a"}))
    assert woken == []
    deliver(caches.namespaces, "MODIFIED", _namespace(3, {"team": "b"}))
    assert woken == [IDENTITY_KEY, *USER_KEYS]


@pytest.mark.usefixtures("users")
def test_a_copy_wakes_its_users_there_and_its_identity_and_the_source_its_identity(
    caches: Caches, woken: list[str]
) -> None:
    caches.identities.store.upsert(_identity())
    copied = secret("captf-creds-aws", labels={LABEL_IDENTITY_MIRROR: "aws"})
    caches.secrets.store.upsert(copied)
    deliver(caches.secrets, "DELETED", copied)
    assert set(woken) == {IDENTITY_KEY, *USER_KEYS}
    woken.clear()
    source = secret("aws") | {"metadata": meta("aws") | {"namespace": "home"}}
    deliver(caches.secrets, "MODIFIED", source)
    assert woken == [IDENTITY_KEY, *USER_KEYS]


def test_an_object_wakes_the_identity_it_starts_or_stops_naming(
    caches: Caches, woken: list[str]
) -> None:
    informer = caches.objects[CLUSTER]
    deliver(informer, "ADDED", captf(CLUSTER, "c1", spec=ON_AWS))
    assert woken == [f"{CLUSTER}/{NS}/c1", IDENTITY_KEY]
    woken.clear()
    deliver(informer, "MODIFIED", captf(CLUSTER, "c1", 2, spec={**ON_AWS, "x": 1}))
    assert woken == [f"{CLUSTER}/{NS}/c1"]
    woken.clear()
    deliver(
        informer,
        "MODIFIED",
        captf(CLUSTER, "c1", 3, spec={"identityRef": {"kind": "Secret", "name": "c"}}),
    )
    assert woken == [f"{CLUSTER}/{NS}/c1", IDENTITY_KEY]


def _plan(approved: bool, phase: str | None = None) -> Json:
    labels = {"captf.io/kind": CLUSTER, LABEL_NAME: "c", "captf.io/uid": "uid-c"}
    body: Json = {
        "metadata": {"name": "c-apply-1", "namespace": NS, "labels": labels},
        "spec": {"approved": approved},
    }
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


@pytest.mark.parametrize(
    ("old", "new", "wakes"),
    [
        (_plan(False), _plan(True), True),  # an approval
        (None, _plan(False), True),  # made
        (_plan(False, "Applied"), None, True),  # pruned, or deleted by a person
        (_plan(False), _plan(False, "Pending"), False),  # the controller's status write
        (_plan(True, "Pending"), _plan(True, "Approved"), False),
    ],
)
def test_a_plan_wakes_its_object_unless_only_its_status_changed(
    old: Json | None, new: Json | None, wakes: bool
) -> None:
    assert plan_wakes(old, new) == ([f"{CLUSTER}/{NS}/c"] if wakes else [])


# --- A runner pod while Pending -------------------------------------------------------------


def _pod(rv: int, waiting: str | None) -> Json:
    labels = {LABEL_KIND: CLUSTER, LABEL_NAME: "c"}
    state = {"waiting": {"reason": waiting}} if waiting else {}
    status = {"phase": "Pending", "containerStatuses": [{"name": "runner", "state": state}]}
    return {"metadata": meta("c-apply-1-x", rv, labels=labels), "status": status}


@pytest.mark.parametrize(
    ("before", "after", "wakes"),
    [
        (None, None, True),  # it appeared: a FailedCreate wait is over
        (None, "ContainerCreating", False),
        ("ContainerCreating", "PodInitializing", False),
        ("ContainerCreating", "ErrImagePull", True),
        ("ErrImagePull", "ImagePullBackOff", True),  # the cause shown changes
        ("ImagePullBackOff", "ContainerCreating", True),  # pulled after all
    ],
)
def test_a_pending_pod_wakes_its_object_when_it_appears_or_its_pull_failure_changes(
    before: str | None, after: str | None, wakes: bool
) -> None:
    key = f"{CLUSTER}/{NS}/c"
    if before is None and after is None:
        assert pod_wakes(None, _pod(1, None)) == [key]
        return
    assert pod_wakes(_pod(1, before), _pod(2, after)) == ([key] if wakes else [])


# --- A Secret its runner writes while its Job runs ------------------------------------------


@pytest.mark.parametrize(
    ("job_status", "wakes"),
    [
        ({"active": 1}, False),  # running: its end wakes the object, this Secret cached
        ({"conditions": [{"type": "Complete", "status": "True"}]}, True),  # ended first
        (None, True),  # the Job not in the cache
    ],
)
def test_a_secret_captf_wrote_wakes_its_object_unless_its_job_still_runs(
    caches: Caches, woken: list[str], job_status: Json | None, wakes: bool
) -> None:
    owner = captf(CLUSTER, "c") | {"status": {"activeJob": "c-apply-1"}}
    caches.objects[CLUSTER].store.upsert(owner)
    if job_status is not None:
        caches.jobs.store.upsert(job(owner, "c-apply-1") | {"status": job_status})
    state = secret(state_secret_name(NS, CLUSTER, "c"), labels={LABEL_NAME: "c"} | MANAGED_BY)
    deliver(caches.own_secrets, "ADDED", state)  # read by it (BY_REF), and its own
    assert woken == ([f"{CLUSTER}/{NS}/c"] * 2 if wakes else [])
    woken.clear()
    deliver(caches.secrets, "ADDED", secret("creds", labels={LABEL_NAME: "c"}))
    assert woken == [f"{CLUSTER}/{NS}/c"]  # not CAPTF's: wakes it whatever runs


def _policy(rv: int, expression: str = "resource.type == 'x'") -> Json:
    rule = {"name": "r", "action": "Deny", "expression": expression, "message": "m"}
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformPolicy",
        "metadata": {"name": "p", "resourceVersion": str(rv)},
        "spec": {"rules": [rule]},
    }


@pytest.fixture
def denied(caches: Caches) -> list[Json]:
    """An object waiting PolicyDenied, one waiting for a Lease, one idle."""
    found = []
    for name, reason in (("c1", "PolicyDenied"), ("c2", "WaitingForRunLease"), ("c3", "Idle")):
        obj = captf(CLUSTER, name) | {"status": {"next": {"reason": reason}}}
        caches.objects[CLUSTER].store.upsert(obj)
        found.append(obj)
    return found


@pytest.mark.usefixtures("denied")
def test_a_policy_change_wakes_only_the_objects_a_policy_denied(
    caches: Caches, woken: list[str]
) -> None:
    deliver(caches.policies, "ADDED", _policy(1))
    assert woken == [f"{CLUSTER}/{NS}/c1"]
    woken.clear()
    deliver(caches.policies, "MODIFIED", _policy(2))  # metadata only: the set is the same
    assert woken == []
    deliver(caches.policies, "MODIFIED", _policy(3, "resource.type == 'y'"))
    assert woken == [f"{CLUSTER}/{NS}/c1"]
    woken.clear()
    deliver(caches.policies, "DELETED", _policy(3, "resource.type == 'y'"))
    assert woken == [f"{CLUSTER}/{NS}/c1"]


@pytest.mark.usefixtures("denied")
def test_a_namespace_label_change_wakes_its_denied_objects(
    caches: Caches, woken: list[str]
) -> None:
    deliver(caches.namespaces, "ADDED", _namespace(1, {"team": "a"}))
    woken.clear()
    deliver(caches.namespaces, "MODIFIED", _namespace(2, {"team": "b"}))
    assert woken == [f"{CLUSTER}/{NS}/c1"]
