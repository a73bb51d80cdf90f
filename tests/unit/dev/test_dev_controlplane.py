"""The status `make run`'s control-plane stand-in writes on a LocalControlPlane
(controller.dev.controlplane): a pure function of the object, its Cluster, the probe of
the API server and the time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.dev import controlplane
from controller.dev.controlplane import Probe, available_condition, control_plane_status
from runtime.jsonobj import Json

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
READY = Probe(True, "v1.35.4")


def _cluster(provisioned: bool | None) -> Json:
    initialization = {} if provisioned is None else {"infrastructureProvisioned": provisioned}
    return {"kind": "Cluster", "status": {"initialization": initialization}}


def _plane(status: Json | None = None, generation: int = 1) -> Json:
    meta = {"name": "demo", "namespace": "default", "generation": generation}
    return {"kind": "LocalControlPlane", "metadata": meta, "spec": {}} | (
        {"status": status} if status is not None else {}
    )


def _initialized(status: Json) -> bool:
    return bool(status["initialization"]["controlPlaneInitialized"])


@pytest.mark.parametrize(
    ("cluster", "probe", "available", "reason"),
    [
        (None, READY, "False", "WaitingForCluster"),
        (_cluster(None), READY, "False", "WaitingForClusterInfrastructure"),
        (_cluster(False), READY, "False", "WaitingForClusterInfrastructure"),
        (_cluster(True), Probe(False, "v1.35.4", "[-]etcd failed"), "False", "APIServerNotReady"),
        (_cluster(True), READY, "True", "Available"),
    ],
)
def test_available_only_with_the_cluster_s_infrastructure_and_a_ready_api_server(
    cluster: Json | None, probe: Probe, available: str, reason: str
) -> None:
    status = control_plane_status(_plane(), cluster, probe, NOW)
    condition = available_condition(status)
    assert (condition["status"], condition["reason"]) == (available, reason)
    assert _initialized(status) is (available == "True")
    assert status["externalManagedControlPlane"] is True
    assert status["version"] == "v1.35.4"
    assert condition["lastTransitionTime"] == "2026-06-01T12:00:00Z"
    assert condition["observedGeneration"] == 1


def test_the_reason_an_api_server_is_not_ready_is_said() -> None:
    probe = Probe(False, why="[-]etcd failed: reason withheld")
    condition = available_condition(control_plane_status(_plane(), _cluster(True), probe, NOW))
    assert condition["message"] == "The API server is not ready: [-]etcd failed: reason withheld"


def test_initialized_stays_true_when_the_api_server_stops_answering() -> None:
    up = control_plane_status(_plane(), _cluster(True), READY, NOW)
    later = NOW + timedelta(minutes=5)
    down = control_plane_status(_plane(up), _cluster(True), Probe(False, why="refused"), later)
    assert _initialized(down)
    assert available_condition(down)["status"] == "False"
    assert available_condition(down)["lastTransitionTime"] == "2026-06-01T12:05:00Z"
    # The version last reported stays while the server does not say one.
    assert down["version"] == "v1.35.4"


def test_the_transition_time_is_kept_while_the_status_holds() -> None:
    first = control_plane_status(_plane(), _cluster(True), READY, NOW)
    again = control_plane_status(_plane(first), _cluster(True), READY, NOW + timedelta(hours=1))
    assert again == first


def test_the_owner_cluster_is_the_cluster_api_cluster_among_the_owners() -> None:
    plane = _plane()
    assert controlplane.owner_cluster(plane) is None
    plane["metadata"]["ownerReferences"] = [
        {"apiVersion": "example.io/v1", "kind": "Cluster", "name": "other"},
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "demo"},
    ]
    assert controlplane.owner_cluster(plane) == "demo"


def test_a_cluster_names_the_object_by_its_contract_reference() -> None:
    assert controlplane.reference("demo") == {
        "apiGroup": "controlplane.dev.captf.io",
        "kind": "LocalControlPlane",
        "name": "demo",
    }
    assert controlplane.control_plane("demo")["apiVersion"] == "controlplane.dev.captf.io/v1alpha1"


_probes = st.builds(
    Probe, st.booleans(), st.sampled_from(["", "v1.35.4", "v1.36.0"]), st.sampled_from(["", "x"])
)
_clusters = st.one_of(st.none(), st.builds(_cluster, st.one_of(st.none(), st.booleans())))


@given(st.lists(st.tuples(_clusters, _probes), min_size=1, max_size=8))
def test_once_initialized_always_initialized_and_a_repeat_changes_nothing(
    rounds: list[tuple[Json | None, Probe]],
) -> None:
    plane = _plane()
    ever = False
    for step, (cluster, probe) in enumerate(rounds):
        now = NOW + timedelta(seconds=5 * step)
        status = control_plane_status(plane, cluster, probe, now)
        ever = ever or available_condition(status)["status"] == "True"
        assert _initialized(status) is ever
        plane = _plane(status)
        # Nothing moved: the stand-in writes nothing.
        assert control_plane_status(plane, cluster, probe, now + timedelta(seconds=1)) == status
