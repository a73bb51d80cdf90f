"""Names built from an object's name fit Kubernetes' limits whatever the name, and the
intervals an object asks for are read no shorter than the floor."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics.names import JOB_NAME_LIMIT, MIN_INTERVAL, Op
from controller.core.jobs.job import op_of
from controller.core.jobs.naming import job_name
from controller.core.spec.policy import read_policy

# What the CRDs accept as an object name (a DNS subdomain), up to their length limit.
LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?", fullmatch=True)
NAMES = st.lists(LABEL, min_size=1, max_size=6).map(".".join).filter(lambda n: len(n) <= 63)
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@given(name=NAMES, uid=st.uuids(), op=st.sampled_from(list(Op)), seq=st.integers(1, 10**6))
def test_job_names_fit_and_keep_op_and_hash(name: str, uid: object, op: Op, seq: int) -> None:
    built = job_name(name, str(uid), op, seq)
    assert len(built) <= JOB_NAME_LIMIT
    assert DNS_SUBDOMAIN.match(built)
    assert op_of({"metadata": {"name": built}}) == op
    assert built.startswith(name[:20].rstrip("-."))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("short", "short-apply-"),
        ("n" * 60, "n" * 48 + "-apply-"),
        ("n" * 47 + "-" + "x" * 12, "n" * 47 + "-apply-"),  # no `-` left before the op
        ("n" * 47 + "." + "x" * 12, "n" * 47 + "-apply-"),  # nor a `.`
    ],
)
def test_long_names_are_cut_before_the_op(name: str, expected: str) -> None:
    built = job_name(name, "uid", "apply", 1)
    assert built[: len(expected)] == expected
    assert len(built) <= JOB_NAME_LIMIT


def test_same_prefix_different_objects_different_jobs() -> None:
    assert job_name("n" * 60 + "a", "u1", "apply", 1) != job_name("n" * 60 + "b", "u2", "apply", 1)


@pytest.mark.parametrize(
    ("interval", "seconds"), [("1ns", MIN_INTERVAL), ("59s", MIN_INTERVAL), ("90s", 90.0)]
)
def test_intervals_are_read_no_shorter_than_the_floor(interval: str, seconds: float) -> None:
    spec = {
        "jobs": {"image": "i"},
        "drift": {"interval": interval},
        "refresh": {"interval": interval},
    }
    policy = read_policy(spec)
    assert (policy.drift_interval, policy.refresh_interval) == (seconds, seconds)
