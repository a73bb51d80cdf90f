"""A template's scale-from-zero pass (controller/core/plan/templates.py): which lookup of
its image it needs first (`template_lookup`, from the template alone), what status it
writes from the spec and the labels, how a failed lookup is retried (doubling from the
condition's own time, 30 s to 10 min), and its Events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics.timefmt import format_time
from controller.core.plan.templates import (
    TemplatePass,
    needs_lookup,
    template_lookup,
    template_pass,
)
from controller.core.spec.image import ImageLookup, Resolved, Unresolved
from runtime.jsonobj import Json

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
IMAGE = "registry.example/machine:1"
CAP = '{"cpu":"4","memory":"16Gi"}'
INFO = '{"architecture":"amd64","operatingSystem":"linux"}'


def tmpl(status: Json | None = None, generation: int = 1, **spec: Any) -> Json:
    inner = {"source": {"image": IMAGE}, "jobs": {"serviceAccountName": "runner"}}
    return {
        "kind": "TerraformMachineTemplate",
        "metadata": {"name": "t", "namespace": "ns", "uid": "u1", "generation": generation},
        "spec": {"template": {"spec": inner}, **spec},
        "status": status or {},
    }


def found(capacity: str | None = CAP, node_info: str | None = INFO) -> Resolved:
    return Resolved(
        IMAGE, "sha256:" + "a" * 64, 1, "machine", capacity=capacity, node_info=node_info
    )


def cond(status: Json) -> Json:
    return next(c for c in status["conditions"] if c["type"] == "CapacityResolved")


def test_a_new_template_asks_for_its_image_with_its_jobs_account() -> None:
    assert template_lookup(tmpl()) == ImageLookup(IMAGE, "ns", "runner")
    # Not looked up (io always gathers the lookup first): nothing is known, nothing written.
    assert template_pass(tmpl(), None, NOW) == TemplatePass()


def _resolved() -> Json:
    status = template_pass(tmpl(), found(), NOW).status
    assert status is not None
    return status


def _failed() -> Json:
    status = template_pass(tmpl(), Unresolved(IMAGE, "RegistryUnavailable", "m"), NOW).status
    assert status is not None
    return status


def _no_image(status: Json | None = None) -> Json:
    obj = tmpl(status, capacity={"cpu": "2"})
    obj["spec"]["template"]["spec"]["source"] = {"configMapRef": {"name": "m"}}
    return obj


@pytest.mark.parametrize(
    ("template", "wanted"),
    [
        (tmpl(), ImageLookup(IMAGE, "ns", "runner")),  # new
        (tmpl(_resolved()), None),  # this generation's image is shown
        (tmpl(_resolved(), generation=2), ImageLookup(IMAGE, "ns", "runner")),  # a new one
        (tmpl(_failed()), ImageLookup(IMAGE, "ns", "runner")),  # failed: retried
        (_no_image(), None),  # nothing to look up: the spec alone
    ],
    ids=["new", "resolved", "new-generation", "failed", "no-image"],
)
def test_the_lookup_a_template_needs_is_known_before_its_pass(
    template: Json, wanted: ImageLookup | None
) -> None:
    assert template_lookup(template) == wanted


@pytest.mark.parametrize(
    ("fact", "spec", "reason", "capacity", "node_info", "source"),
    [
        (found(), {}, "CapacityResolved", {"cpu": "4", "memory": "16Gi"}, "amd64", "Image"),
        (found(None, None), {}, "CapacityNotDeclared", None, None, "Image"),
        (found('{"cpu":"x"}'), {}, "CapacityLabelInvalid", None, "amd64", "Image"),
        (
            found('{"cpu":"x"}'),
            {"capacity": {"cpu": "2"}},
            "CapacityResolved",
            {"cpu": "2"},
            "amd64",
            "Spec",
        ),
        (Unresolved(IMAGE, "ImageNotFound", "m"), {}, "ImageInspectFailed", None, None, "Image"),
        (
            Unresolved(IMAGE, "ImageNotFound", "m"),
            {"capacity": {"cpu": "2"}},
            "CapacityResolved",
            {"cpu": "2"},
            None,
            "Spec",
        ),
        (
            found(),
            {"nodeInfo": {"architecture": "arm64"}},
            "CapacityResolved",
            {"cpu": "4", "memory": "16Gi"},
            "arm64",
            "Image",
        ),
    ],
)
def test_the_status_from_the_spec_and_the_labels(
    fact: Any, spec: Json, reason: str, capacity: Json | None, node_info: str | None, source: str
) -> None:
    status = template_pass(tmpl(**spec), fact, NOW).status
    assert status is not None
    assert cond(status)["reason"] == reason
    assert status.get("capacity") == capacity
    assert (status.get("nodeInfo") or {}).get("architecture") == node_info
    assert status["capacitySource"]["source"] == source
    assert status["observedGeneration"] == 1


def test_a_resolved_template_asks_nothing_until_its_generation_moves() -> None:
    status = template_pass(tmpl(), found(), NOW).status
    done = tmpl(status)
    assert not needs_lookup(done)
    assert template_lookup(done) is None
    assert template_pass(done, None, NOW) == TemplatePass()
    assert template_pass(done, found(), NOW).status is None  # nothing changes
    assert needs_lookup(tmpl(status, generation=2))


def test_a_smaller_capacity_nulls_the_keys_it_drops() -> None:
    old = template_pass(tmpl(), found('{"cpu":"4","nvidia.com/gpu":"1"}'), NOW).status
    patch = template_pass(tmpl(old, generation=2, capacity={"cpu": "8"}), found(), NOW).status
    assert patch is not None
    assert patch["capacity"] == {"cpu": "8", "nvidia.com/gpu": None}


def test_a_failed_lookup_keeps_the_values_shown_and_warns_once() -> None:
    good = template_pass(tmpl(), found(), NOW).status
    assert good is not None
    failing = Unresolved(IMAGE, "RegistryUnavailable", "m")
    first = template_pass(tmpl(good, generation=2), failing, NOW)
    assert first.status is not None
    assert "capacity" not in first.status  # unchanged: the values shown stay
    assert cond(first.status)["reason"] == "ImageInspectFailed"
    assert [e.reason for e in first.events] == ["ImageInspectFailed"]
    again = template_pass(tmpl(good | first.status, generation=2), failing, NOW)
    assert again.events == ()


@given(st.floats(min_value=0, max_value=10_000))
def test_retries_double_from_the_condition_time_within_30s_and_10min(elapsed: float) -> None:
    since = NOW - timedelta(seconds=elapsed)
    failed = {
        "type": "CapacityResolved",
        "status": "False",
        "reason": "ImageInspectFailed",
        "lastTransitionTime": format_time(since),
    }
    todo = template_pass(tmpl({"conditions": [failed]}), Unresolved(IMAGE, "x", "m"), NOW)
    assert todo.requeue is not None
    assert 30.0 <= todo.requeue <= 600.0
    assert todo.requeue == pytest.approx(min(max(elapsed, 30.0), 600.0), abs=1.0)


def test_a_template_without_an_image_reads_its_spec_without_a_lookup() -> None:
    obj = tmpl(capacity={"cpu": "2"})
    obj["spec"]["template"]["spec"]["source"] = {"configMapRef": {"name": "m"}}
    assert template_lookup(obj) is None
    todo = template_pass(obj, None, NOW)
    assert todo.status is not None
    assert todo.status["capacity"] == {"cpu": "2"}
    assert [e.reason for e in todo.events] == ["CapacityResolved"]


def test_without_an_account_the_lookup_uses_the_runners() -> None:
    obj = tmpl()
    del obj["spec"]["template"]["spec"]["jobs"]["serviceAccountName"]
    assert template_lookup(obj) == ImageLookup(IMAGE, "ns", "captf-runner")
