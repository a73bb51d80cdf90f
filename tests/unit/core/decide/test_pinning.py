"""Digest pinning of module images (controller/core/decide/pinning.py), through the
plan of a pass: when a lookup is asked for, which digest a Job runs, what a moved tag
does to a mutable cluster and to an immutable machine, and the bad input that waits."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import timedelta

import pytest

from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    ANN_MODULE_IMAGE,
    CLUSTER,
    FINALIZER,
    MACHINE,
    POOL,
    Reason,
)
from controller.core.decide.decision import Requeue, Run
from controller.core.decide.facts import Facts
from controller.core.decide.pinning import IMAGE_WAITS
from controller.core.decide.settings import Settings
from controller.core.decide.snapshot import build
from controller.core.plan.planner import Plan, plan_pass
from controller.core.spec.image import ImageFact, Resolved, Unresolved
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    captf,
    owners_of,
    secret,
    state,
    ts,
)

REF = "reg.local/team/mod:1"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
ROLES = {CLUSTER: "cluster", MACHINE: "machine", POOL: "machinepool"}


def image_object(kind: str, reference: str = REF) -> Json:
    spec: Json = {"source": {"image": reference, "configMapRef": None}, "drift": {"interval": "1h"}}
    name = "c1" if kind == CLUSTER else "m1"
    return captf(kind, name, spec=spec)


def world(obj: Json) -> list[Json]:
    members = [] if obj["kind"] == CLUSTER else [captf(CLUSTER, "c1", ready=True)]
    return [*owners_of(obj), *members, secret("creds", {"token": "t0ps3cret"})]


def resolved(
    digest: str, kind: str = CLUSTER, *, reference: str = REF, asked: bool = True
) -> Resolved:
    return Resolved(reference, digest, size=1000, role=ROLES[kind], asked=asked)


def pass_of(
    obj: Json, others: list[Json], fact: ImageFact | None = None, limit: int = 1 << 30
) -> Plan:
    return plan_pass(
        build(obj, others), NOW, settings=Settings(image_size_limit=limit), facts=Facts(image=fact)
    )


def volume_of(todo: Plan) -> str:
    assert todo.launch is not None
    pod = todo.launch.job["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "image" in v]
    return str(volume["image"]["reference"])


def condition(todo: Plan) -> Json:
    assert todo.status is not None
    [found] = [c for c in todo.status["conditions"] if c["type"] == "ImageResolved"]
    return dict(found)


def applied(obj: Json, others: list[Json], digest: str, *, ago_minutes: float = 120) -> list[Json]:
    """The world after an apply of `digest` succeeded `ago_minutes` ago: its inputs Secret,
    its Job, and the state recording its hash."""
    todo = pass_of(obj, others, resolved(digest, obj["kind"]))
    assert todo.launch is not None
    assert todo.launch.inputs_secret is not None
    when = ago(minutes=ago_minutes)
    inputs = todo.launch.inputs_secret
    inputs["metadata"]["creationTimestamp"] = ts(when - timedelta(seconds=30))
    job = dict(todo.launch.job)
    job["metadata"] = job["metadata"] | {"creationTimestamp": ts(when - timedelta(seconds=30))}
    notes = job["metadata"]["annotations"] | {"captf.io/result": '{"outcome":"succeeded"}'}
    job["metadata"]["annotations"] = notes | {"captf.io/accounted": "true"}
    job["status"] = {
        "succeeded": 1,
        "completionTime": ts(when),
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": ts(when)},
            {"type": "Complete", "status": "True", "lastTransitionTime": ts(when)},
        ],
    }
    digest_hash = inputs["metadata"]["annotations"][ANN_INPUTS_HASH]
    name = obj["metadata"]["name"]
    return [*others, inputs, job, state(name, serial=1, inputs=digest_hash, kind=obj["kind"])]


@pytest.mark.parametrize("kind", [CLUSTER, MACHINE, POOL])
def test_a_first_apply_waits_for_a_lookup_then_runs_the_digest_and_records_it(kind: str) -> None:
    obj = image_object(kind)
    others = world(obj)
    first = pass_of(obj, others)
    assert first.launch is None
    assert isinstance(first.decision, Requeue)
    assert first.decision.reason == Reason.IMAGE_RESOLVING
    assert first.image_lookup is not None
    assert first.image_lookup.reference == REF

    second = pass_of(obj, others, resolved(D1, kind))
    assert isinstance(second.decision, Run)
    assert second.decision.op == "apply"
    assert second.image_lookup is None
    assert volume_of(second) == f"reg.local/team/mod@{D1}"
    assert second.launch is not None
    assert second.launch.inputs_secret is not None
    data = second.launch.inputs_secret["data"]
    assert base64.b64decode(data["image.digest"]).decode() == D1
    assert base64.b64decode(data["image"]).decode() == REF
    assert second.launch.job["metadata"]["annotations"][ANN_MODULE_IMAGE] == REF
    assert condition(second)["status"] == "True"


BAD = [
    (Unresolved(REF, Reason.IMAGE_NOT_FOUND, f"registry reg.local has no image {REF}"), {}),
    (Unresolved(REF, Reason.REGISTRY_UNAUTHORIZED, "registry reg.local refused it"), {}),
    (Unresolved(REF, Reason.REGISTRY_UNAVAILABLE, "registry reg.local answered HTTP 500"), {}),
    (Resolved(REF, D1, size=2048, role="cluster"), {"limit": 1024}),
    (Resolved(REF, D1, size=10, role="machine"), {}),
]
BAD_REASONS = [
    Reason.IMAGE_NOT_FOUND,
    Reason.REGISTRY_UNAUTHORIZED,
    Reason.REGISTRY_UNAVAILABLE,
    Reason.IMAGE_TOO_LARGE,
    Reason.IMAGE_ROLE_MISMATCH,
]


@pytest.mark.parametrize(
    ("bad", "reason"), list(zip(BAD, BAD_REASONS, strict=True)), ids=BAD_REASONS
)
def test_bad_input_waits_with_its_condition_and_starts_nothing(
    bad: tuple[ImageFact, dict[str, int]], reason: str
) -> None:
    fact, settings = bad
    obj = image_object(CLUSTER)
    todo = pass_of(obj, world(obj), fact, settings.get("limit", 1 << 30))
    assert todo.launch is None
    assert todo.image_lookup is None  # the lookup was made: no second one this pass
    assert isinstance(todo.decision, Requeue)
    assert todo.decision.reason == reason
    assert todo.requeue == IMAGE_WAITS[reason] > 0  # never a hot loop
    cond = condition(todo)
    assert (cond["status"], cond["reason"]) == ("False", reason)
    assert "t0ps3cret" not in json.dumps(todo.status)


def test_an_image_without_a_role_label_passes_the_role_check() -> None:
    obj = image_object(MACHINE)
    todo = pass_of(obj, world(obj), Resolved(REF, D1, size=10, role=None))
    assert isinstance(todo.decision, Run)


def test_an_applied_cluster_resolves_again_only_when_its_drift_check_is_due() -> None:
    obj = image_object(CLUSTER)
    fresh = applied(obj, world(obj), D1, ago_minutes=30)
    quiet = pass_of(obj, fresh)
    assert quiet.image_lookup is None
    assert quiet.launch is None  # not once per reconcile

    due = applied(obj, world(obj), D1, ago_minutes=120)
    first = pass_of(obj, due)
    assert first.image_lookup is not None
    same = pass_of(obj, due, resolved(D1))
    assert isinstance(same.decision, Run)
    assert same.decision.op == "drift"
    assert volume_of(same) == f"reg.local/team/mod@{D1}"


@pytest.mark.parametrize("kind", [CLUSTER, POOL])
def test_a_moved_tag_re_applies_a_mutable_kind_and_says_why(kind: str) -> None:
    obj = image_object(kind)
    due = applied(obj, world(obj), D1)
    moved = pass_of(obj, due, resolved(D2, kind))
    assert isinstance(moved.decision, Run)
    assert (moved.decision.op, moved.decision.reason) == ("apply", Reason.IMAGE_TAG_MOVED)
    assert volume_of(moved) == f"reg.local/team/mod@{D2}"
    assert moved.status is not None
    assert moved.status["next"]["reason"] == Reason.IMAGE_TAG_MOVED


def test_a_spec_change_of_a_mutable_kind_resolves_again_before_its_apply() -> None:
    obj = image_object(CLUSTER)
    due = applied(obj, world(obj), D1, ago_minutes=5)
    obj["spec"]["variables"] = {"size": 4}
    first = pass_of(obj, due)
    assert first.image_lookup is not None
    second = pass_of(obj, due, resolved(D2))
    assert isinstance(second.decision, Run)
    assert second.decision.reason == Reason.INPUTS_CHANGED  # not only the digest changed
    assert volume_of(second) == f"reg.local/team/mod@{D2}"


def test_an_applied_machine_never_resolves_again_and_notes_a_moved_tag() -> None:
    obj = image_object(MACHINE)
    due = applied(obj, world(obj), D1)
    drift = pass_of(obj, due)
    assert drift.image_lookup is None
    assert isinstance(drift.decision, Run)
    # Its apply's result carried no contract reading: the health watch reads it again, by
    # its drift check, due as well (issue 39: one Job reads both).
    assert (drift.decision.op, drift.decision.reason) == ("drift", Reason.HEALTH_CHECK_DUE)
    assert volume_of(drift) == f"reg.local/team/mod@{D1}"
    # Another object's lookup, in io's cache, shows the tag moved: noted, not used.
    seen = pass_of(obj, due, resolved(D2, MACHINE, asked=False))
    assert volume_of(seen) == f"reg.local/team/mod@{D1}"
    cond = condition(seen)
    assert (cond["status"], cond["reason"]) == ("True", "TagMoved")
    assert D2[:19] in cond["message"]
    assert D1[:19] in cond["message"]


def test_a_cached_answer_never_changes_what_a_mutable_kind_runs() -> None:
    obj = image_object(CLUSTER)
    fresh = applied(obj, world(obj), D1, ago_minutes=30)
    todo = pass_of(obj, fresh, resolved(D2, asked=False))
    assert todo.launch is None
    assert todo.image_lookup is None


def test_a_machine_destroy_runs_the_pinned_digest_without_a_lookup() -> None:
    obj = image_object(MACHINE)
    done = applied(obj, world(obj), D1)
    obj["metadata"]["deletionTimestamp"] = ts(ago(minutes=1))
    obj["metadata"]["finalizers"] = [FINALIZER]
    todo = pass_of(obj, done)
    assert todo.image_lookup is None
    assert isinstance(todo.decision, Run)
    assert todo.decision.op == "destroy"
    assert volume_of(todo) == f"reg.local/team/mod@{D1}"


def test_a_digest_reference_is_used_as_is_and_a_drift_check_does_not_look_it_up() -> None:
    reference = f"reg.local/team/mod@{D1}"
    obj = image_object(CLUSTER, reference)
    others = world(obj)
    first = pass_of(obj, others)
    # The apply still asks, for the size and role checks; the digest is the reference's.
    assert first.image_lookup is not None
    applied_world = applied_with_reference(obj, others, reference)
    drift = pass_of(obj, applied_world)
    assert drift.image_lookup is None
    assert isinstance(drift.decision, Run)
    assert drift.decision.op == "drift"
    assert volume_of(drift) == reference


def applied_with_reference(obj: Json, others: list[Json], reference: str) -> list[Json]:
    fact = replace(resolved(D1), reference=reference)
    todo = pass_of(obj, others, fact)
    assert todo.launch is not None
    assert todo.launch.inputs_secret is not None
    digest_hash = todo.launch.inputs_secret["metadata"]["annotations"][ANN_INPUTS_HASH]
    return [*others, todo.launch.inputs_secret, state("c1", serial=1, inputs=digest_hash)]


def test_status_shows_the_image_and_digest_the_newest_job_ran() -> None:
    obj = image_object(CLUSTER)
    due = applied(obj, world(obj), D1, ago_minutes=30)
    todo = pass_of(obj, due)
    assert todo.status is not None
    # ... and how its pod had the image (the default settings: an image volume).
    assert todo.status["image"] == {"reference": REF, "digest": D1, "mount": "volume"}
