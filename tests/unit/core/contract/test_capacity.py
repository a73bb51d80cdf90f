"""The scale-from-zero labels' shape (controller/core/contract/capacity.py): one home for
`captf lint image`, `captf image build --capacity --node-info` and the templates' status."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.contract.capacity import (
    LABEL_CAPACITY,
    LABEL_NODE_INFO,
    ShapeError,
    is_quantity,
    label_problems,
    labels_of,
    parse_capacity,
    parse_node_info,
    parse_pairs,
)
from controller.core.contract.roles import Role
from controller.lint.image_rules import ImageFacts, lint_image


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"cpu":"4","memory":"16Gi"}', None),
        ('{"cpu":"500m","nvidia.com/gpu":"1","ephemeral-storage":"100G"}', None),
        ('{"cpu":"1e3"}', None),
        ("{}", "non-empty"),
        ("[]", "non-empty"),
        ("cpu=4", "not JSON"),
        ('{"cpu":4}', "not a quantity"),
        ('{"cpu":"four"}', "not a quantity"),
        ('{"cpu":"4 Gi"}', "not a quantity"),
        ('{"-cpu":"4"}', "not a resource name"),
        ('{"Bad_Prefix/gpu":"1"}', "not a resource name"),
    ],
)
def test_capacity_label_shape(text: str, problem: str | None) -> None:
    if problem is None:
        assert parse_capacity(text) == json.loads(text)
    else:
        with pytest.raises(ShapeError, match=problem):
            parse_capacity(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"architecture":"amd64","operatingSystem":"linux"}', None),
        ('{"architecture":"arm64"}', None),
        ('{"operatingSystem":"windows"}', None),
        ("{}", "architecture and/or operatingSystem"),
        ('{"architecture":"x86_64"}', "one of amd64"),
        ('{"operatingSystem":"darwin"}', "one of linux"),
        ('{"kernel":"6.1"}', "is not architecture"),
    ],
)
def test_node_info_label_shape(text: str, problem: str | None) -> None:
    if problem is None:
        assert parse_node_info(text) == json.loads(text)
    else:
        with pytest.raises(ShapeError, match=problem):
            parse_node_info(text)


@given(
    st.integers(min_value=0, max_value=10**9),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"]),
)
def test_every_integer_with_a_suffix_is_a_quantity(number: int, suffix: str) -> None:
    assert is_quantity(f"{number}{suffix}")


@given(st.text(alphabet="abcxyz _/", min_size=1, max_size=8))
def test_letters_alone_are_never_a_quantity(text: str) -> None:
    assert not is_quantity(text)


def test_build_writes_labels_that_lint_and_the_templates_read_back() -> None:
    labels = labels_of(parse_pairs("cpu=4, memory=16Gi"), parse_pairs('{"architecture":"amd64"}'))
    assert labels == {
        LABEL_CAPACITY: '{"cpu":"4","memory":"16Gi"}',
        LABEL_NODE_INFO: '{"architecture":"amd64"}',
    }
    assert label_problems(labels) == []
    assert parse_capacity(labels[LABEL_CAPACITY]) == {"cpu": "4", "memory": "16Gi"}


def test_build_refuses_a_wrong_shape_before_building() -> None:
    with pytest.raises(ShapeError):
        labels_of(parse_pairs("cpu=lots"), None)
    with pytest.raises(ShapeError, match="KEY=VALUE"):
        parse_pairs("cpu")


@pytest.mark.parametrize(
    ("role", "labels", "found"),
    [
        (Role.MACHINE, {LABEL_CAPACITY: '{"cpu":"4"}'}, []),
        (Role.MACHINEPOOL, {LABEL_NODE_INFO: '{"architecture":"arm64"}'}, []),
        (Role.MACHINE, {LABEL_CAPACITY: '{"cpu":"x"}'}, ["error"]),
        (Role.MACHINE, {LABEL_NODE_INFO: "amd64"}, ["error"]),
        (Role.CLUSTER, {LABEL_CAPACITY: '{"cpu":"4"}'}, ["warning"]),
    ],
)
def test_lint_image_checks_the_capacity_labels(
    role: Role, labels: dict[str, str], found: list[str]
) -> None:
    facts = ImageFacts(entries={}, labels=labels)
    mine = [f for f in lint_image(facts, role) if f.rule == "image-label-capacity"]
    assert [f.severity.value for f in mine] == found
