"""Whether the next apply takes the name of an apply deleted while it ran.

A cluster's or pool's vanished apply is recorded on its inputs Secret, and the name is
skipped for good: the record names that Job and no other. A machine's records nothing
(its immutable inputs are applied again whenever there is no state to show for them),
so its next apply is counted from the Jobs that exist and takes the vanished one's
name, as after an operator deletes a failed Job; accounting keys on the new Job's uid."""

from __future__ import annotations

import pytest

from controller.core.basics.names import CLUSTER, MACHINE, POOL
from controller.core.decide import snapshot
from controller.core.decide.decision import Run
from controller.core.decide.facts import Facts
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests import builders as b


def _world(kind: str) -> tuple[Json, list[Json]]:
    """An object of `kind` never applied, whose first apply is its active Job."""
    name = {CLUSTER: "c1", POOL: "p1", MACHINE: "m1"}[kind]
    obj = b.captf(kind, name, finalizers=["captf.io/destroy"])
    others = [*b.owners_of(obj), b.module_configmap(name), b.secret("creds", {"t": "tttt"})]
    if kind != CLUSTER:
        others.append(b.captf(ready=True, finalizers=["captf.io/destroy"]))
    first = plan_pass(snapshot.build(obj, others), b.NOW)
    assert isinstance(first.decision, Run), first.decision
    assert first.launch is not None
    obj["status"] = {"activeJob": first.launch.name}
    return obj, others


@pytest.mark.parametrize(("kind", "reused"), [(CLUSTER, False), (POOL, False), (MACHINE, True)])
def test_the_next_apply_after_a_vanished_one(kind: str, reused: bool) -> None:
    obj, others = _world(kind)
    vanished = obj["status"]["activeJob"]
    todo = plan_pass(snapshot.build(obj, others), b.NOW, facts=Facts(active_gone=True))
    assert todo.gone is not None
    assert todo.gone.job == vanished
    assert (todo.gone.record is not None) is not reused
    if todo.gone.record is not None:  # the pass after the record lands
        recorded = todo.gone.record.create
        assert recorded is not None
        others = [*others, recorded]
    obj["status"] = {}
    following = plan_pass(snapshot.build(obj, others), b.NOW)
    assert following.launch is not None
    assert (following.launch.name == vanished) is reused
