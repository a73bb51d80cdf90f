"""What the fleet's schedules ask of each set of credentials, and the stretch
(controller/core/leases/budget_demand.py)."""

from __future__ import annotations

import pytest

from controller.core.basics.names import CLUSTER, IDENTITY, LABEL_CLUSTER_NAME, MACHINE, POOL
from controller.core.leases.budget_demand import demand_by_key, per_minute_of, stretches
from runtime.jsonobj import Json

JOBS = {"image": "captf:dev"}


def _obj(kind: str, name: str, spec: Json | None = None, **meta: object) -> Json:
    return {
        "kind": kind,
        "metadata": {"name": name, "namespace": "team-a", **meta},
        "spec": {"jobs": JOBS, **(spec or {})},
    }


def _fleet(machines: int, pools: int) -> list[Json]:
    cluster = _obj(
        CLUSTER,
        "tf-prod",
        {"identityRef": {"kind": IDENTITY, "name": "aws-prod"}},
        ownerReferences=[{"kind": "Cluster", "name": "prod"}],
    )
    member = {"labels": {LABEL_CLUSTER_NAME: "prod"}}
    return [
        cluster,
        *(_obj(MACHINE, f"m{i}", **member) for i in range(machines)),
        *(_obj(POOL, f"p{i}", **member) for i in range(pools)),
    ]


def test_demand_follows_the_members_to_their_clusters_identity() -> None:
    # Each machine: health 5m + drift 30m; each pool: membership 1m + drift 30m;
    # the cluster: drift 30m. A loose machine with its own Secret is a key of its own.
    loose = _obj(MACHINE, "loose", {"identityRef": {"kind": "Secret", "name": "creds"}})
    gone = _obj(MACHINE, "gone", deletionTimestamp="2026-12-05T00:00:00Z")
    bad = _obj(MACHINE, "bad", {"drift": {"interval": "soon"}})
    demand = demand_by_key([*_fleet(30, 2), loose, gone, bad])
    assert demand["identity aws-prod"] == pytest.approx(
        30 * (12 + 2) / 60 + 2 * (60 + 2) / 60 + 2 / 60
    )
    assert demand["secret team-a/creds"] == pytest.approx(14 / 60)
    assert set(demand) == {"identity aws-prod", "secret team-a/creds", "none"}  # bad asks 0


def test_schedules_turned_off_ask_nothing() -> None:
    off = {"health": {"interval": "0s"}, "drift": {"interval": "0s"}}
    assert demand_by_key([_obj(MACHINE, "m", off)]) == {"none": 0.0}


@pytest.mark.parametrize(
    ("spec", "budget"),
    [({}, 60), ({"backgroundJobsPerMinute": 40}, 40), ({"backgroundJobsPerMinute": 0}, 60)],
)
def test_per_minute(spec: Json, budget: int) -> None:
    identities = {"aws-prod": {"spec": spec}}
    assert per_minute_of("identity aws-prod", identities, 60) == budget
    assert per_minute_of("secret team-a/creds", identities, 60) == 60


def test_stretch_of_a_large_fleet() -> None:
    # 500 machines and 20 pools under a budget of 40 a minute: 137.4 asked, 36 aimed at.
    identities = {"aws-prod": {"spec": {"backgroundJobsPerMinute": 40}}}
    stretch, demand, budget = stretches(_fleet(500, 20), identities, 60)["identity aws-prod"]
    assert (budget, round(demand, 1)) == (40, 137.4)
    assert stretch == 3.82
    assert stretches(_fleet(30, 2), identities, 60)["identity aws-prod"][0] == 1.0
