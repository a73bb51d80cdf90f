"""Pod status as the process node writes it: phase, container states, conditions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.dev.node.podstatus import (
    ContainerView,
    PodView,
    Running,
    State,
    Terminated,
    Waiting,
    phase,
    pod_status,
)
from runtime.jsonobj import Json

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
T1 = T0 + timedelta(seconds=7)
RUN = Running(T0)
OK = Terminated(0, T0, T1)
ERR = Terminated(3, T0, T1)
CREATING = Waiting("ContainerCreating")


def view(*states: State, restart: bool = False, stopped: bool = False, **more: Any) -> PodView:
    containers = tuple(
        ContainerView(f"c{i}", "captf:dev", s, will_restart=restart, **more)
        for i, s in enumerate(states)
    )
    return PodView(containers, "127.1.0.9", "127.0.0.1", T0, stopped=stopped)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (view(CREATING), "Pending"),
        (view(RUN, CREATING), "Pending"),
        (view(RUN), "Running"),
        (view(RUN, OK), "Running"),
        (view(OK), "Succeeded"),
        (view(OK, OK), "Succeeded"),
        (view(OK, ERR), "Failed"),
        (view(ERR), "Failed"),
        (view(ERR, restart=True), "Running"),
        (view(ERR, restart=True, stopped=True), "Failed"),
        (view(CREATING, stopped=True), "Failed"),
        (view(Terminated(137, T0, T1), stopped=True), "Failed"),
    ],
)
def test_phase(pod: PodView, expected: str) -> None:
    assert phase(pod) == expected


def test_a_container_back_off_after_a_start_is_running_not_pending() -> None:
    waiting = ContainerView(
        "c", "captf:dev", Waiting("CrashLoopBackOff"), last_state=ERR, restart_count=1
    )
    pod = PodView((waiting,), "127.1.0.9", "127.0.0.1", T0)
    assert phase(pod) == "Running"


def _conditions(status: Json) -> dict[str, Json]:
    return {c["type"]: c for c in status["conditions"]}


def test_a_ready_running_pod() -> None:
    pod = {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    status = pod_status(pod, view(RUN, ready=True, process_id=42), T1)
    assert status["phase"] == "Running"
    assert status["podIP"] == "127.1.0.9"
    assert status["podIPs"] == [{"ip": "127.1.0.9"}]
    assert status["hostIP"] == "127.0.0.1"
    assert status["startTime"] == "2026-01-02T03:04:05Z"
    conds = _conditions(status)
    assert {k: c["status"] for k, c in conds.items()} == {
        "PodScheduled": "True",
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }
    (container,) = status["containerStatuses"]
    assert container["state"] == {"running": {"startedAt": "2026-01-02T03:04:05Z"}}
    assert container["ready"] is True
    assert container["started"] is True
    assert container["containerID"] == "process://42"


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (OK, "Completed"),
        (ERR, "Error"),
        (Terminated(128, None, T1, "StartError", "no such file"), "StartError"),
    ],
)
def test_a_terminated_container_has_its_code_and_reason(state: Terminated, reason: str) -> None:
    (container,) = pod_status({}, view(state), T1)["containerStatuses"]
    terminated = container["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (state.exit_code, reason)
    assert terminated["finishedAt"] == "2026-01-02T03:04:12Z"
    assert container["ready"] is False
    assert container["started"] is False


def test_an_ended_pod_is_not_ready_because_it_completed() -> None:
    conds = _conditions(pod_status({}, view(OK, ready=False), T1))
    assert conds["Ready"]["status"] == "False"
    assert conds["Ready"]["reason"] == "PodCompleted"
    assert conds["PodReadyToStartContainers"]["status"] == "False"


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    first = pod_status({}, view(RUN, ready=True), T0)
    later = pod_status({"status": first}, view(RUN, ready=True), T1)
    assert _conditions(later)["Ready"]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    ended = pod_status({"status": later}, view(OK), T1)
    assert _conditions(ended)["Ready"]["lastTransitionTime"] == "2026-01-02T03:04:12Z"


def test_conditions_others_wrote_are_kept_and_start_time_never_moves() -> None:
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    old = {"status": {"startTime": "2025-12-31T00:00:00Z", "conditions": [disruption]}}
    status = pod_status(old, view(Terminated(143, T0, T1), stopped=True), T1)
    assert disruption in status["conditions"]
    assert status["startTime"] == "2025-12-31T00:00:00Z"
    assert status["phase"] == "Failed"


def test_the_old_status_is_not_modified() -> None:
    old: Json = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    pod_status(old, view(RUN, ready=True), T1)
    assert old == {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}


def test_a_waiting_container_says_why() -> None:
    state = Waiting("CreateContainerConfigError", "secret creds not found")
    (container,) = pod_status({}, view(state), T1)["containerStatuses"]
    assert container["state"] == {
        "waiting": {"reason": "CreateContainerConfigError", "message": "secret creds not found"}
    }
