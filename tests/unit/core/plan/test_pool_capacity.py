"""A TerraformMachinePool's scale-from-zero status in its pass's one status write
(controller/core/plan/pool_capacity.py): `status.capacity`, `status.nodeInfo`,
`status.capacitySource` and CapacityResolved, by the templates' rule, from the pool's
spec and the answer its pass has for its module image (Facts.image), never a lookup of
its own."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.basics.names import MACHINE, POOL
from controller.core.decide import snapshot
from controller.core.decide.facts import Facts
from controller.core.plan.planner import Plan, plan_pass
from controller.core.spec.image import ImageFact, Resolved, Unresolved
from runtime.jsonobj import Json
from tests.builders import NOW, base_objects, captf

IMAGE = "registry.example/pool:1"
OTHER = "registry.example/pool:0"
CAP = '{"cpu":"4","memory":"16Gi","nvidia.com/gpu":"1"}'
INFO = '{"architecture":"arm64","operatingSystem":"linux"}'
CAPACITY = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}
NODE_INFO = {"architecture": "arm64", "operatingSystem": "linux"}


def pool(status: Json | None = None, image: str | None = IMAGE, **spec: Any) -> Json:
    obj = captf(POOL, "p1", status=status)
    obj["spec"]["source"] = {"image": image} if image else {"configMapRef": {"name": "p1-module"}}
    obj["spec"] |= spec
    return obj


def labelled(
    reference: str = IMAGE, capacity: str | None = CAP, info: str | None = INFO, asked: bool = True
) -> Resolved:
    digest = "sha256:" + "b" * 64
    return Resolved(reference, digest, 1, None, asked, capacity=capacity, node_info=info)


def failed(asked: bool = True) -> Unresolved:
    return Unresolved(IMAGE, "RegistryUnavailable", "registry.example: no answer", asked)


SHOWN: Json = {
    "capacity": CAPACITY,
    "nodeInfo": NODE_INFO,
    "capacitySource": {"source": "Image", "image": IMAGE},
    "conditions": [
        {
            "type": "CapacityResolved",
            "status": "True",
            "reason": "CapacityResolved",
            "message": "capacity and nodeInfo from the module image's labels",
            "lastTransitionTime": "2026-06-01T11:00:00Z",
        }
    ],
}


def plan(obj: Json, fact: ImageFact | None) -> Plan:
    return plan_pass(snapshot.build(obj, base_objects()), NOW, facts=Facts(image=fact))


def shown(todo: Plan, obj: Json) -> Json:
    """The status after the pass: what was there with the pass's merge patch applied."""
    return merge(obj.get("status") or {}, todo.status or {})


def merge(old: Json, patch: Json) -> Json:
    out = dict(old)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(old.get(key), dict):
            out[key] = merge(old[key], value)
        else:
            out[key] = value
    return out


def cond(status: Json) -> tuple[str, str]:
    found = next(c for c in status["conditions"] if c["type"] == "CapacityResolved")
    return found["status"], found["reason"]


RESOLVED = ("True", "CapacityResolved")
NOT_DECLARED = ("True", "CapacityNotDeclared")
INVALID = ("False", "CapacityLabelInvalid")
READ = {"source": "Image", "image": IMAGE}  # the image's labels read
UNREAD = {"source": "Image"}
SPEC = {"source": "Spec"}
CPU2 = {"cpu": "2", "memory": "4Gi"}
AMD = {"architecture": "amd64"}
CASES = [
    # The lookup made before the pool's apply, plan or drift check.
    (pool(), labelled(), CAPACITY, NODE_INFO, READ, RESOLVED),
    # io's short cache of another object's lookup of the same reference.
    (pool(), labelled(asked=False), CAPACITY, NODE_INFO, READ, RESOLVED),
    # Another object's failed lookup says nothing of this pool: nothing read yet.
    (pool(), failed(asked=False), None, None, UNREAD, ("Unknown", "ImageNotInspected")),
    # Its own failed lookup keeps what the image said before.
    (pool(SHOWN), failed(), CAPACITY, NODE_INFO, UNREAD, ("False", "ImageInspectFailed")),
    # Between lookups: as shown.
    (pool(SHOWN), None, CAPACITY, NODE_INFO, READ, RESOLVED),
    # An answer about another image than the one it names: as shown.
    (pool(SHOWN), labelled(OTHER, capacity='{"cpu":"1"}'), CAPACITY, NODE_INFO, READ, RESOLVED),
    # The spec stands without the registry; the image's nodeInfo stays.
    (pool(SHOWN, capacity=CPU2), None, CPU2, NODE_INFO, SPEC | {"image": IMAGE}, RESOLVED),
    (pool(image=None, capacity=CPU2, nodeInfo=AMD), None, CPU2, AMD, SPEC, RESOLVED),
    (pool(image=None), None, None, None, UNREAD, NOT_DECLARED),
    # A label of the wrong shape: nothing shown, and why.
    (pool(SHOWN), labelled(capacity='{"cpu": 4}'), None, NODE_INFO, READ, INVALID),
    # An image without the labels: the values it had are gone.
    (pool(SHOWN), labelled(capacity=None, info=None), None, None, READ, NOT_DECLARED),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "fact", "capacity", "node_info", "source", "condition"), CASES)
def test_the_pool_shows_the_capacity_its_spec_or_image_declares(
    obj: Json,
    fact: ImageFact | None,
    capacity: Json | None,
    node_info: Json | None,
    source: Json,
    condition: tuple[str, str],
) -> None:
    status = shown(plan(obj, fact), obj)
    assert status.get("capacity") == capacity
    assert status.get("nodeInfo") == node_info
    assert status["capacitySource"] == source
    assert cond(status) == condition


def test_a_smaller_capacity_is_written_as_nulls_of_the_keys_it_drops() -> None:
    obj = pool(SHOWN)
    todo = plan(obj, labelled(capacity='{"cpu":"4","memory":"16Gi"}'))
    assert todo.status is not None
    assert todo.status["capacity"] == {"nvidia.com/gpu": None}


def test_the_new_values_are_announced_once_before_the_status_shows_them() -> None:
    obj = pool()
    todo = plan(obj, labelled())
    events = [e for e in todo.events if e.reason == "CapacityResolved"]
    assert len(events) == 1
    assert events[0].type == "Normal"
    assert '"cpu":"4"' in events[0].message
    assert '"architecture":"arm64"' in events[0].message
    # The pass after it finds the status written: no Event, no status change of its own.
    again = pool(shown(todo, obj))
    replay = plan(again, labelled())
    assert not [e for e in replay.events if e.reason == "CapacityResolved"]
    assert "capacity" not in (replay.status or {})


def test_a_failed_lookup_of_its_own_keeps_its_warning_to_image_resolved() -> None:
    todo = plan(pool(SHOWN), failed())
    assert not [e for e in todo.events if "capacity" in e.name or "inspect" in e.name]


def test_other_kinds_show_no_capacity() -> None:
    obj = captf(MACHINE, "m1")
    obj["spec"]["source"] = {"image": IMAGE}
    status = (plan(obj, labelled()).status) or {}
    assert not {"capacity", "nodeInfo", "capacitySource"} & set(status)
    assert "CapacityResolved" not in {c["type"] for c in status.get("conditions") or []}
