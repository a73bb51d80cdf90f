"""Image references the node pulls, the pull policy in force, and the image back-off."""

from __future__ import annotations

import itertools

import pytest

from controller.dev.node.reference import (
    BadReference,
    Reference,
    backoff_delays,
    default_policy,
    needs_pull,
    parse_reference,
    policy_of,
)

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("127.0.0.1:5000/mod:v1", Reference("127.0.0.1:5000", "mod", "v1")),
        ("localhost/team/mod", Reference("localhost", "team/mod")),
        (f"registry.example/a/b@{DIGEST}", Reference("registry.example", "a/b", "", DIGEST)),
        (
            f"registry.example:443/a/b:v2@{DIGEST}",
            Reference("registry.example:443", "a/b", "v2", DIGEST),
        ),
    ],
)
def test_a_reference_with_a_registry_host_is_split(image: str, expected: Reference) -> None:
    ref = parse_reference(image)
    assert ref == expected
    assert str(ref) == image


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu",  # no registry: the node has no default one
        "team/mod:v1",
        "127.0.0.1:5000/Mod:v1",  # repositories are lower case
        "127.0.0.1:5000/mod@sha256:abc",  # a digest has 64 hex digits
        "127.0.0.1:5000/mod:bad/tag",
        "127.0.0.1:5000/../mod",
    ],
)
def test_a_reference_the_node_cannot_pull_is_refused(image: str) -> None:
    with pytest.raises(BadReference):
        parse_reference(image)


def test_a_pinned_reference_names_the_repository_at_a_digest() -> None:
    assert parse_reference("127.0.0.1:5000/a/mod:v1").at(DIGEST) == f"127.0.0.1:5000/a/mod@{DIGEST}"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("127.0.0.1:5000/mod", "Always"),
        ("127.0.0.1:5000/mod:latest", "Always"),
        ("127.0.0.1:5000/mod:v1", "IfNotPresent"),
        (f"127.0.0.1:5000/mod@{DIGEST}", "IfNotPresent"),
        (f"127.0.0.1:5000/mod:latest@{DIGEST}", "Always"),
        ("localhost:5000/mod", "Always"),  # the port is not a tag
    ],
)
def test_the_default_policy_is_the_apis(image: str, policy: str) -> None:
    assert default_policy(image) == policy
    assert policy_of(image, None) == policy
    assert policy_of(image, "") == policy


def test_a_given_policy_wins_and_an_unknown_one_is_refused() -> None:
    assert policy_of("127.0.0.1:5000/mod:latest", "Never") == "Never"
    with pytest.raises(BadReference, match="Sometimes"):
        policy_of("127.0.0.1:5000/mod:v1", "Sometimes")


@pytest.mark.parametrize(
    ("policy", "present", "pull"),
    [
        ("Always", True, True),
        ("Always", False, True),
        ("IfNotPresent", True, False),
        ("IfNotPresent", False, True),
        ("Never", True, False),
        ("Never", False, False),
    ],
)
def test_who_asks_the_registry(policy: str, present: bool, pull: bool) -> None:
    assert needs_pull(policy, present) is pull


def test_the_image_back_off_doubles_from_10_seconds_to_300() -> None:
    delays = list(itertools.islice(backoff_delays(), 8))
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
