"""The reconciler on an in-memory API server: its write order, and a crash after every write.

Each row of the table stops the process at its k-th write (the write does not reach
the server), then starts a fresh reconciler (new caches, new memory, new metrics)
on what the server holds, and runs it to rest. Whatever k: one Job per attempt,
every finished Job accounted with one Event, every Lease free, the status at rest,
and a pass at rest writes nothing."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import orjson
import pytest
from prometheus_client import CollectorRegistry

from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_INPUTS_HASH,
    ANN_MEMBER_JOBS,
    ANN_RESULT,
    ANN_SERIAL,
    CLUSTER,
    FINALIZER,
    PLURALS,
    POOL,
    state_secret_name,
)
from controller.core.basics.timefmt import format_time
from controller.core.decide.runner_rbac import role_binding, service_account
from controller.core.decide.settings import Settings
from controller.core.jobs.job import annotations_of, is_finished
from controller.core.spec.policy import RunnerPolicy
from controller.io import api
from controller.io.accountant import JobMetrics
from controller.io.caches import Caches
from controller.io.keys import key_of
from controller.io.reconciler import Reconciler
from runtime.clock import SteppedClock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from tests.builders import NOW, NS, captf, module_configmap, owners_of, secret
from tests.fakeapi import Crash, FakeApi

PASSES = 20


def _prefix(path: str) -> str:
    return path.rsplit("/", 1)[0]


def _world(kind: str) -> FakeApi:
    """A cluster (already applied and Ready when the object under test is a pool), its
    module and credentials."""
    fake = FakeApi()
    fake.create(api.secret_path(NS), secret("creds", {"token": "t"}))
    fake.create(f"/api/v1/namespaces/{NS}/configmaps", module_configmap())
    if kind == CLUSTER:
        fake.create(_prefix(api.object_path(CLUSTER, NS, "c1")), captf())
        _create_all(fake, owners_of(captf()))
        return fake
    # The cluster ran first: the namespace has the runner's RBAC already.
    fake.create(f"/api/v1/namespaces/{NS}/serviceaccounts", service_account(NS))
    fake.create(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings", role_binding(NS)
    )
    ready = captf(ready=True, finalizers=[FINALIZER])
    fake.create(_prefix(api.object_path(CLUSTER, NS, "c1")), ready)
    pool = captf(POOL, "p1", spec={"source": {"configMapRef": {"name": "c1-module"}}})
    fake.create(_prefix(api.object_path(POOL, NS, "p1")), pool)
    _create_all(fake, owners_of(pool))
    return fake


def _create_all(fake: FakeApi, objects: list[Json]) -> None:
    """Cluster API's objects and Secrets, where the API keeps them."""
    for obj in objects:
        if obj["kind"] == "Secret":
            fake.create(api.secret_path(NS), obj)
        else:
            fake.create(api.resource_path(api.CAPI_OBJECTS[obj["kind"]], NS), obj)


@dataclass
class Process:
    """One controller process: its caches, its reconciler, its metrics."""

    fake: FakeApi
    clock: SteppedClock
    registry: CollectorRegistry
    caches: Caches
    reconciler: Reconciler

    @classmethod
    def start(cls, fake: FakeApi, clock: SteppedClock) -> Process:
        registry = CollectorRegistry()
        caches = Caches(fake, clock=clock, namespace=NS)
        reconciler = Reconciler(
            client=fake,
            caches=caches,
            clock=clock,
            metrics=JobMetrics(registry),
            settings=Settings(max_concurrent_runs=2, slot_namespace=NS, runner=RunnerPolicy()),
        )
        return cls(fake, clock, registry, caches, reconciler)

    async def run_to_rest(self, key: str, runner: Runner | None = None) -> None:
        """Reconciles, runs the Jobs it starts (to success, unless `runner` fails some),
        and lets time pass as the reconcile asks, until a pass writes nothing, nothing
        runs and nothing is due."""
        runner = runner or Runner()
        for _ in range(PASSES):
            self.fake.clock_text = format_time(self.clock.now())
            self.fake.sync(self.caches)
            before = len(self.fake.writes)
            result = await self.reconciler.reconcile(key)
            ran = runner.finish_running(self.fake)
            if len(self.fake.writes) == before and not ran and result.requeue_after is None:
                return
            # A finished Job wakes the object at once (its watch); else the requeue does.
            await self.clock.advance(1.0 if ran else max(result.requeue_after or 0.0, 1.0))
        raise AssertionError(f"no rest after {PASSES} passes: {self.fake.writes}")

    def samples(self, name: str = "captf_job_attempts_count") -> float:
        total = 0.0
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name == name:
                    total += sample.value
        return total

    def step_samples(self) -> float:
        return self.samples("captf_runner_step_seconds_count")


@dataclass
class Runner:
    """Plays the runner and the Job controller: every running Job finishes, the first
    `failures` of them failed, the others succeeded (an apply writing the state of the
    inputs it ran with). Shared by a process and its restart. `in_pod`: the result is
    left as the pod's termination message, for the controller to record on the Job."""

    failures: int = 0
    in_pod: bool = False

    def finish_running(self, fake: FakeApi) -> bool:
        ran = False
        for job in fake.of("jobs"):
            if not is_finished(job):
                ran = True
                failed = self.failures > 0
                self.failures -= failed
                _finish(fake, job, failed, in_pod=self.in_pod)
        return ran


def _finish(fake: FakeApi, job: Json, failed: bool, *, in_pod: bool = False) -> None:
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    outcome = "failed" if failed else "succeeded"
    at = fake.clock_text
    stored = fake.collection(_prefix(api.job_path(ns, name)))[name]
    result = _result(job, outcome)
    if in_pod:
        _pod_terminated(fake, job, result)
    else:
        stored["metadata"]["annotations"] |= {ANN_RESULT: result}
    stored["metadata"]["resourceVersion"] += "0"
    if failed:
        done = {"type": "Failed", "status": "True", "lastTransitionTime": at}
        stored["status"] = {"failed": 1, "conditions": [done | {"reason": "BackoffLimitExceeded"}]}
        return
    done = {"type": "Complete", "status": "True", "lastTransitionTime": at}
    stored["status"] = {"succeeded": 1, "completionTime": at, "conditions": [done]}
    labels = job["metadata"]["labels"]
    owner, kind = labels["captf.io/name"], labels["captf.io/kind"]
    named = state_secret_name(ns, kind, owner)
    state = secret(named, {"terraform.tfstate": "{}"})
    notes = {ANN_SERIAL: "1", ANN_INPUTS_HASH: annotations_of(job)[ANN_INPUTS_HASH]}
    meta = state["metadata"] | {"annotations": notes, "resourceVersion": "1", "uid": "uid-state"}
    meta["labels"] = {"captf.io/kind": kind, "captf.io/name": owner}
    fake.collection(api.secret_path(ns))[named] = state | {"metadata": meta}


def _result(job: Json, outcome: str) -> str:
    """What a runner reports: its Job's uid and its one step."""
    step = {"name": "apply", "exitCode": 1 if outcome == "failed" else 0, "seconds": 3.5}
    body = {"outcome": outcome, "job": job["metadata"]["uid"], "steps": [step]}
    return orjson.dumps(body).decode()


def _pod_terminated(fake: FakeApi, job: Json, message: str) -> None:
    """The Job's pod as the Job controller labels it and a kubelet leaves it."""
    labels = {"batch.kubernetes.io/controller-uid": job["metadata"]["uid"]}
    ended = {"exitCode": 0, "finishedAt": fake.clock_text, "message": message}
    pod = {
        "metadata": {"name": f"{job['metadata']['name']}-pod", "labels": labels},
        "status": {"containerStatuses": [{"name": "runner", "state": {"terminated": ended}}]},
    }
    fake.create(api.resource_path(api.PODS, NS), pod)


def _object(fake: FakeApi, kind: str, name: str) -> Json:
    [obj] = [o for o in fake.of(PLURALS[kind]) if o["metadata"]["name"] == name]
    return obj


SCENARIOS = {CLUSTER: "c1", POOL: "p1"}
# The writes of one apply, in the order the reconciler makes them.
CLUSTER_WRITES = [
    ("PATCH", "terraformclusters/c1"),  # finalizer
    ("POST", "serviceaccounts"),  # the runner's, before the namespace's first Job
    ("POST", "rolebindings"),  # to the runner's ClusterRole
    ("POST", "secrets"),  # durable inputs
    ("POST", "leases"),  # run slot
    ("POST", "leases"),  # the cluster's operation Lease
    ("POST", "jobs"),
    ("PATCH", "terraformclusters/c1/status"),  # activeJob
    ("PATCH", "terraformclusters/c1"),  # block-move set
    ("POST", "events"),  # Applied
    ("PUT", "leases/captf-op-terraformcluster-c1"),
    ("PUT", "leases/captf-run-slot-0"),
    ("PATCH", "jobs/"),  # accounted
    ("PATCH", "terraformclusters/c1/status"),  # Ready, idle
    ("PATCH", "terraformclusters/c1"),  # block-move removed
]
POOL_WRITES = [
    ("PATCH", "terraformmachinepools/p1"),
    ("POST", "secrets"),
    ("POST", "leases"),  # run slot
    ("POST", "leases"),  # the entry on the cluster's operation Lease
    ("POST", "leases"),  # the pool's own operation Lease
    ("POST", "jobs"),
    ("PATCH", "terraformmachinepools/p1/status"),
    ("PATCH", "terraformmachinepools/p1"),  # block-move set
    ("POST", "events"),
    ("PUT", "leases/captf-op-terraformcluster-c1"),
    ("PUT", "leases/captf-run-slot-0"),
    ("PUT", "leases/captf-op-terraformmachinepool-p1"),
    ("PATCH", "jobs/"),
    ("PATCH", "terraformmachinepools/p1/status"),
    ("PATCH", "terraformmachinepools/p1"),  # block-move removed
]
# An apply that fails once, then succeeds: the failure waits out its backoff, and once
# the success is accounted the resolved failure is pruned.
RETRY_WRITES = [
    *CLUSTER_WRITES[:9],
    ("POST", "events"),  # JobFailed
    ("PUT", "leases/captf-op-terraformcluster-c1"),
    ("PUT", "leases/captf-run-slot-0"),
    ("PATCH", "jobs/"),  # accounted
    ("PATCH", "terraformclusters/c1/status"),  # InputsChangedBackoff, failures
    ("PATCH", "terraformclusters/c1"),  # block-move removed
    ("PUT", "leases/captf-run-slot-0"),
    ("PUT", "leases/captf-op-terraformcluster-c1"),
    ("POST", "jobs"),  # the retry
    ("PATCH", "terraformclusters/c1/status"),
    ("PATCH", "terraformclusters/c1"),  # block-move set
    ("POST", "events"),  # Applied
    ("PUT", "leases/captf-op-terraformcluster-c1"),
    ("PUT", "leases/captf-run-slot-0"),
    ("PATCH", "jobs/"),
    ("DELETE", "jobs/"),  # the failure, resolved by the success
    ("PATCH", "terraformclusters/c1/status"),
    ("PATCH", "terraformclusters/c1"),  # block-move removed
]
WRITES = {CLUSTER: CLUSTER_WRITES, POOL: POOL_WRITES}
# The result left in the pod: recorded on the Job first, then the Job is accounted.
IN_POD_WRITES = [*CLUSTER_WRITES[:9], ("PATCH", "jobs/"), *CLUSTER_WRITES[9:]]


@pytest.mark.parametrize("kind", [CLUSTER, POOL])
async def test_one_apply_writes_in_the_documented_order(kind: str) -> None:
    fake = _world(kind)
    process = Process.start(fake, SteppedClock(NOW))
    await process.run_to_rest(key_of(kind, NS, SCENARIOS[kind]))
    assert len(fake.writes) == len(WRITES[kind]), fake.writes
    for (method, path), (want_method, want_path) in zip(fake.writes, WRITES[kind], strict=True):
        assert method == want_method, (method, path)
        assert want_path in path, (method, path)
    _assert_at_rest(fake, kind)


@pytest.mark.parametrize(
    ("kind", "k"),
    [(kind, k) for kind in (CLUSTER, POOL) for k in range(1, len(WRITES[kind]) + 1)],
)
async def test_a_crash_at_any_write_converges_exactly_once(kind: str, k: int) -> None:
    fake = _world(kind)
    clock = SteppedClock(NOW)
    key = key_of(kind, NS, SCENARIOS[kind])
    first = Process.start(fake, clock)
    fake.crash_at(k)
    with pytest.raises(Crash):
        await first.run_to_rest(key)
    second = Process.start(fake, clock)  # the restart: nothing remembered
    await second.run_to_rest(key)
    _assert_at_rest(fake, kind)
    # One sample per process at most (a restarted process counts again, by design), and
    # at least one in all.
    assert first.samples() <= 1
    assert second.samples() <= 1
    assert first.samples() + second.samples() >= 1
    # The step histogram is observed with the attempts, and as often.
    assert (first.step_samples(), second.step_samples()) == (first.samples(), second.samples())


async def test_a_retried_apply_writes_in_the_documented_order() -> None:
    fake = _world(CLUSTER)
    process = Process.start(fake, SteppedClock(NOW))
    await process.run_to_rest(key_of(CLUSTER, NS, "c1"), Runner(failures=1))
    assert len(fake.writes) == len(RETRY_WRITES), fake.writes
    for (method, path), (want_method, want_path) in zip(fake.writes, RETRY_WRITES, strict=True):
        assert method == want_method, (method, path)
        assert want_path in path, (method, path)
    _assert_retried(fake)


@pytest.mark.parametrize("k", range(1, len(RETRY_WRITES) + 1))
async def test_a_crash_at_any_write_of_a_retry_converges_exactly_once(k: int) -> None:
    fake = _world(CLUSTER)
    clock = SteppedClock(NOW)
    key = key_of(CLUSTER, NS, "c1")
    runner = Runner(failures=1)
    first = Process.start(fake, clock)
    fake.crash_at(k)
    with pytest.raises(Crash):
        await first.run_to_rest(key, runner)
    second = Process.start(fake, clock)
    await second.run_to_rest(key, runner)
    _assert_retried(fake)


def _assert_retried(fake: FakeApi) -> None:
    """Two Jobs were created, no more; each has one Event; the failure is pruned."""
    created = [path for method, path in fake.writes if method == "POST" and path.endswith("/jobs")]
    assert len(created) == 2, fake.writes
    reasons = sorted(e["reason"] for e in fake.of("events"))
    assert reasons == ["Applied", "JobFailed"]
    _assert_at_rest(fake, CLUSTER)


def _assert_at_rest(fake: FakeApi, kind: str) -> None:
    jobs = fake.of("jobs")
    assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]  # no second Job
    [job] = jobs
    assert annotations_of(job).get(ANN_ACCOUNTED) == "true"
    name = job["metadata"]["name"]
    events = [e for e in fake.of("events") if e["metadata"]["name"].startswith(f"{name}.")]
    assert [e["reason"] for e in events] == ["Applied"]
    for lease in fake.of("leases"):
        assert not (lease.get("spec") or {}).get("holderIdentity"), lease
        assert not annotations_of(lease).get(ANN_MEMBER_JOBS), lease
    obj = _object(fake, kind, SCENARIOS[kind])
    assert FINALIZER in obj["metadata"]["finalizers"]
    status = obj["status"]
    assert "activeJob" not in status
    assert status["next"]["reason"] == "Idle"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready
    last = status["lastRun"]
    assert (last["job"], last["op"], last["result"]) == (name, "apply", "succeeded")
    assert last["steps"] == [{"name": "apply", "exitCode": 0, "seconds": 3.5}]


async def test_a_result_left_in_the_pod_is_recorded_on_the_job_before_its_accounting() -> None:
    fake = _world(CLUSTER)
    process = Process.start(fake, SteppedClock(NOW))
    await process.run_to_rest(key_of(CLUSTER, NS, "c1"), Runner(in_pod=True))
    assert len(fake.writes) == len(IN_POD_WRITES), fake.writes
    for (method, path), (want_method, want_path) in zip(fake.writes, IN_POD_WRITES, strict=True):
        assert method == want_method, (method, path)
        assert want_path in path, (method, path)
    _assert_at_rest(fake, CLUSTER)
    [job] = fake.of("jobs")
    assert orjson.loads(annotations_of(job)[ANN_RESULT])["outcome"] == "succeeded"


@pytest.mark.parametrize("k", range(1, len(IN_POD_WRITES) + 1))
async def test_a_crash_at_any_write_with_the_result_in_the_pod_converges(k: int) -> None:
    fake = _world(CLUSTER)
    clock = SteppedClock(NOW)
    key = key_of(CLUSTER, NS, "c1")
    runner = Runner(in_pod=True)
    first = Process.start(fake, clock)
    fake.crash_at(k)
    with pytest.raises(Crash):
        await first.run_to_rest(key, runner)
    second = Process.start(fake, clock)
    await second.run_to_rest(key, runner)
    _assert_at_rest(fake, CLUSTER)
    [job] = fake.of("jobs")
    assert orjson.loads(annotations_of(job)[ANN_RESULT])["outcome"] == "succeeded"


async def test_a_pass_at_rest_writes_nothing() -> None:
    fake = _world(CLUSTER)
    process = Process.start(fake, SteppedClock(NOW))
    key = key_of(CLUSTER, NS, "c1")
    await process.run_to_rest(key)
    written = len(fake.writes)
    for _ in range(3):
        fake.sync(process.caches)
        await process.reconciler.reconcile(key)
    assert len(fake.writes) == written


async def test_a_cache_that_has_not_seen_the_last_status_write_causes_no_conflict() -> None:
    """The status is written as a merge patch of what the pass changes: a pass on a cache
    one write behind neither fails nor undoes the write it has not seen."""
    fake = _world(CLUSTER)
    c1 = fake.collection(_prefix(api.object_path(CLUSTER, NS, "c1")))["c1"]
    c1["metadata"]["finalizers"] = [FINALIZER]
    process = Process.start(fake, SteppedClock(NOW))
    key = key_of(CLUSTER, NS, "c1")
    fake.sync(process.caches)
    await process.reconciler.reconcile(key)  # starts the apply; status names the Job
    result = await process.reconciler.reconcile(key)  # the cache still shows the old status
    assert not result.requeue  # no conflict
    status = _object(fake, CLUSTER, "c1")["status"]
    assert status.get("activeJob")
    assert status["next"]["reason"] == "JobCacheBehind"


async def test_an_apply_deleted_while_it_ran_is_recorded_and_its_leases_freed() -> None:
    fake = _world(CLUSTER)
    process = Process.start(fake, SteppedClock(NOW))
    key = key_of(CLUSTER, NS, "c1")
    fake.sync(process.caches)
    await process.reconciler.reconcile(key)
    fake.sync(process.caches)
    await process.reconciler.reconcile(key)  # the cache shows the Job: it runs
    [job] = fake.of("jobs")
    name = job["metadata"]["name"]
    del fake.collection(_prefix(api.job_path(NS, name)))[name]
    fake.sync(process.caches)
    await process.reconciler.reconcile(key)
    [inputs] = [s for s in fake.of("secrets") if "-inputs-" in s["metadata"]["name"]]
    assert annotations_of(inputs)["captf.io/interrupted-apply"] == name
    # The record makes the apply due again: a second Job, under another name.
    [second] = fake.of("jobs")
    assert second["metadata"]["name"] != name


async def test_a_refused_job_frees_its_leases_and_waits_with_one_warning() -> None:
    fake = _world(CLUSTER)
    fake.refuse["jobs"] = ApiError(403, "Forbidden", "exceeded quota: count/jobs.batch")
    process = Process.start(fake, SteppedClock(NOW))
    key = key_of(CLUSTER, NS, "c1")
    for _ in range(3):
        fake.sync(process.caches)
        await process.reconciler.reconcile(key)
    assert fake.of("jobs") == []
    for lease in fake.of("leases"):
        assert not (lease.get("spec") or {}).get("holderIdentity"), lease
    status = _object(fake, CLUSTER, "c1")["status"]
    assert status["next"]["reason"] == "JobRefused"
    warnings = [e for e in fake.of("events") if e["reason"] == "JobRefused"]
    assert len(warnings) == 1
    assert "exceeded quota" in warnings[0]["message"]


async def test_a_pass_writes_nothing_into_the_caches_objects() -> None:
    """The caches are read-only: accounting marks the Job through the API server, never in
    the cached copy (which would make the cache claim a write the server may not have)."""
    fake = _world(CLUSTER)
    process = Process.start(fake, SteppedClock(NOW))
    key = key_of(CLUSTER, NS, "c1")
    fake.sync(process.caches)
    await process.reconciler.reconcile(key)
    Runner().finish_running(fake)
    fake.sync(process.caches)
    before = [copy.deepcopy(list(i.store)) for i in process.caches.informers()]
    await process.reconciler.reconcile(key)  # accounts the finished Job
    assert [list(i.store) for i in process.caches.informers()] == before
    [job] = fake.of("jobs")
    assert annotations_of(job)[ANN_ACCOUNTED] == "true"
