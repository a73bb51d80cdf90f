"""Which held Leases the janitor frees: holders that never became Jobs, and nothing else."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controller.core.basics.names import ANN_HOLDER_NAMESPACE
from controller.core.leases.stale import STALE_AFTER, stale_leases
from runtime.jsonobj import Json
from tests.builders import NOW, lease

OLD = NOW - timedelta(seconds=STALE_AFTER)
RECENT = NOW - timedelta(seconds=STALE_AFTER - 1)


def _held(holder: str | None, taken: Any = OLD, namespace: str | None = None) -> Json:
    out = lease("captf-run-slot-0", holder=holder)
    if taken is not None:
        out["spec"]["acquireTime"] = taken.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if namespace:
        out["metadata"]["annotations"] = {ANN_HOLDER_NAMESPACE: namespace}
    return out


NONE: set[Any] = set()
# (case, lease, Jobs that exist as (namespace, name), Jobs being created, watched ns, freed)
CASES = [
    ("holder never existed, held long enough", _held("ghost"), NONE, NONE, None, True),
    ("holder exists", _held("c1-a"), {("default", "c1-a")}, NONE, None, False),
    ("holder being created here", _held("c1-a"), NONE, {"c1-a"}, None, False),
    ("held for less than STALE_AFTER", _held("ghost", RECENT), NONE, NONE, None, False),
    ("not held", _held(None), NONE, NONE, None, False),
    ("holder's namespace not watched", _held("ghost", namespace="b"), NONE, NONE, "a", False),
    ("holder's namespace watched", _held("ghost", namespace="a"), NONE, NONE, "a", True),
    ("holder in its own namespace", _held("j", namespace="b"), {("b", "j")}, NONE, None, False),
    ("no acquire time", _held("ghost", None), NONE, NONE, None, False),
]


@pytest.mark.parametrize(
    ("held", "jobs", "creating", "watched", "freed"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_stale_leases(
    held: Json, jobs: set[tuple[str, str]], creating: set[str], watched: str | None, freed: bool
) -> None:
    found = list(
        stale_leases(
            [held],
            job_exists=lambda ns, name: (ns, name) in jobs,
            creating=creating,
            now=NOW,
            watched=watched,
        )
    )
    assert found == ([held] if freed else [])
