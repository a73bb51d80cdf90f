"""What woke each reconcile: the first watch to queue its key since its last reconcile
(`self` for an object's own event), else `requeue`."""

from __future__ import annotations

import copy

import pytest
from prometheus_client import CollectorRegistry

from controller.core.basics.names import (
    CAPI_API_VERSION,
    CAPI_CLUSTER,
    CLUSTER,
    LABEL_CLUSTER_NAME,
    POOL,
)
from controller.io.caches import Caches
from controller.io.handlers import wire_handlers
from controller.io.triggers import AT_ONCE, REQUEUE, RETRY, SELF, Triggers
from runtime.loop import DONE, Result, requeue_after
from tests.unit.io.cache_objects import NS, captf, deliver, job


def counted(registry: CollectorRegistry, kind: str, trigger: str) -> float:
    sample = registry.get_sample_value("captf_reconciles_total", {"kind": kind, "trigger": trigger})
    return sample or 0.0


def test_the_first_wake_since_the_last_reconcile_is_its_trigger() -> None:
    registry = CollectorRegistry()
    triggers = Triggers(registry)
    key = f"{POOL}/{NS}/p"
    triggers.woke(key, "jobs")
    triggers.woke(key, "machines")  # folded into the first: the queue holds the key once
    assert triggers.reconciling(key) == "jobs"
    assert triggers.reconciling(key) == REQUEUE  # nothing woke it since: a timed requeue
    triggers.woke(key, "secrets")
    assert triggers.reconciling(key) == "secrets"
    assert counted(registry, POOL, "jobs") == 1
    assert counted(registry, POOL, REQUEUE) == 1
    assert counted(registry, POOL, "secrets") == 1
    assert counted(registry, POOL, "machines") == 0


def test_the_handlers_name_the_watch_and_an_objects_own_event(caches: Caches) -> None:
    registry = CollectorRegistry()
    triggers = Triggers(registry)
    keys: list[str] = []
    wire_handlers(caches, keys.append, triggers)
    owned = [{"apiVersion": CAPI_API_VERSION, "kind": CAPI_CLUSTER, "name": "c"}]
    cluster = captf(CLUSTER, "c", ownerReferences=owned)
    member = captf(POOL, "p", labels={LABEL_CLUSTER_NAME: "c"})
    caches.objects[POOL].store.upsert(member)
    deliver(caches.objects[CLUSTER], "ADDED", cluster)
    ready = copy.deepcopy(cluster)
    ready["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    ready["metadata"]["resourceVersion"] = "2"
    deliver(caches.objects[CLUSTER], "MODIFIED", ready)  # wakes its member, not itself
    deliver(caches.jobs, "ADDED", job(member, "p-apply-1"))
    assert keys == [f"{CLUSTER}/{NS}/c", f"{POOL}/{NS}/p", f"{POOL}/{NS}/p"]
    assert triggers.reconciling(f"{CLUSTER}/{NS}/c") == SELF
    assert triggers.reconciling(f"{POOL}/{NS}/p") == "terraformclusters"


@pytest.mark.parametrize(
    ("result", "trigger"),
    [
        (Result(requeue=True), RETRY),  # a conflict, a Lease found taken
        (None, RETRY),  # an error
        (requeue_after(0.0), AT_ONCE),
        (requeue_after(30.0), REQUEUE),  # a timed requeue
        (DONE, REQUEUE),
    ],
)
def test_a_reconcile_that_asks_to_come_back_soon_is_the_next_ones_trigger(
    result: Result | None, trigger: str
) -> None:
    triggers = Triggers(CollectorRegistry())
    key = f"{POOL}/{NS}/p"
    triggers.reconciling(key)
    triggers.ended(key, result)
    assert triggers.reconciling(key) == trigger


def test_a_watch_that_woke_the_key_during_the_reconcile_comes_first() -> None:
    triggers = Triggers(CollectorRegistry())
    key = f"{POOL}/{NS}/p"
    triggers.reconciling(key)
    triggers.woke(key, "jobs")
    triggers.ended(key, Result(requeue=True))
    assert triggers.reconciling(key) == "jobs"
