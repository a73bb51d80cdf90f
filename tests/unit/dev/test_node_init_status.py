"""Pod status with init containers, as a kubelet reports it; and the root filesystem of a
container run from a pulled image."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from controller.dev.node.container import pulls_own_image
from controller.dev.node.podstatus import ContainerView, PodView, State, Waiting, phase, pod_status
from controller.dev.node.volumes import Mounts
from tests.unit.dev.test_node_podstatus import CREATING, ERR, OK, RUN, T0, T1

INITIALIZING = Waiting("PodInitializing")


def pod(
    inits: tuple[State, ...],
    containers: tuple[State, ...],
    *,
    restart: bool = False,
    stopped: bool = False,
) -> PodView:
    def views(prefix: str, states: tuple[State, ...], again: bool) -> tuple[ContainerView, ...]:
        return tuple(
            ContainerView(f"{prefix}{i}", "img", s, will_restart=again)
            for i, s in enumerate(states)
        )

    return PodView(
        views("c", containers, False),
        "127.1.0.9",
        "127.0.0.1",
        T0,
        stopped=stopped,
        init_containers=views("i", inits, restart),
    )


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (pod((CREATING,), (INITIALIZING,)), "Pending"),
        (pod((RUN,), (INITIALIZING,)), "Pending"),
        (pod((OK, RUN), (INITIALIZING,)), "Pending"),
        (pod((OK, OK), (CREATING,)), "Pending"),
        (pod((OK, OK), (RUN,)), "Running"),
        (pod((OK,), (OK,)), "Succeeded"),
        (pod((OK,), (ERR,)), "Failed"),
        # An init container that failed for good fails the pod; one that will run again
        # (restartPolicy OnFailure or Always) keeps it Pending.
        (pod((OK, ERR), (INITIALIZING,)), "Failed"),
        (pod((ERR,), (INITIALIZING,), restart=True), "Pending"),
        (pod((ERR,), (INITIALIZING,), restart=True, stopped=True), "Failed"),
        (pod((RUN,), (INITIALIZING,), stopped=True), "Failed"),
    ],
)
def test_phase_with_init_containers(view: PodView, expected: str) -> None:
    assert phase(view) == expected


def test_init_container_statuses_and_the_initialized_condition() -> None:
    running = pod((OK, RUN), (INITIALIZING,))
    status = pod_status({}, running, T1)
    assert [s["name"] for s in status["initContainerStatuses"]] == ["i0", "i1"]
    assert status["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Initialized"]["status"] == "False"
    assert conditions["Initialized"]["reason"] == "ContainersNotInitialized"
    done = pod_status(
        status, replace(running, init_containers=pod((OK, OK), ()).init_containers), T1
    )
    assert {c["type"]: c["status"] for c in done["conditions"]}["Initialized"] == "True"


def test_a_pod_without_init_containers_writes_no_init_statuses() -> None:
    status = pod_status({}, pod((), (RUN,)), T1)
    assert "initContainerStatuses" not in status
    assert {c["type"]: c["status"] for c in status["conditions"]}["Initialized"] == "True"


def test_a_pulled_image_s_paths_lie_in_its_root_and_mounts_still_win(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    mounts = Mounts({"/copier": tmp_path / "v" / "copier"}, root)
    assert mounts.rewrite("/captf") == f"{root}/captf"
    assert mounts.rewrite("/copier/captf-copy") == f"{tmp_path}/v/copier/captf-copy"
    assert mounts.rewrite("relative") == "relative"
    # A table image (no root) keeps the host's paths.
    assert Mounts({}).rewrite("/captf") == "/captf"


@pytest.mark.parametrize(
    ("image", "pulled"),
    [
        ("127.0.0.1:5000/team/module@sha256:" + "a" * 64, True),
        ("registry.example/captf:v1", True),
        ("localhost/captf", True),
        ("captf:dev", False),
        ("python:3", False),
        ("team/captf:v1", False),
    ],
)
def test_which_container_images_are_pulled(image: str, pulled: bool) -> None:
    assert pulls_own_image(image) == pulled
