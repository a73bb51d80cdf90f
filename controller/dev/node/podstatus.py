"""Pod status as a kubelet writes it, from what the node knows of each container.

Pure: `pod_status(pod, view, now)` is the status to write. Conditions the node
does not own (PodScheduled from the binding, DisruptionTarget from an eviction
or a Job controller) are kept as they are; the ones it owns keep their
lastTransitionTime while their status does not change.

Phase, as a kubelet reports it:
  Pending    while an init container has not yet exited 0 (they run one at a time,
             in order), then until every container has started once (or the pod
             ended first)
  Running    while any container runs or will be restarted
  Succeeded  every container ended with 0 and none will be restarted
  Failed     every container ended, one of them not with 0 (or the pod was
             stopped before a container ran), and none will be restarted; or an
             init container failed and will not be restarted (restartPolicy Never)"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from controller.core.basics.timefmt import format_time
from runtime.jsonobj import Json

OWNED_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
# A container runtime's exit code for a container that could not start.
START_ERROR_CODE = 128


@dataclass(frozen=True)
class Waiting:
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Running:
    started_at: datetime


@dataclass(frozen=True)
class Terminated:
    exit_code: int
    started_at: datetime | None
    finished_at: datetime
    reason: str = ""
    message: str = ""

    @property
    def shown_reason(self) -> str:
        return self.reason or ("Completed" if self.exit_code == 0 else "Error")


State = Waiting | Running | Terminated


@dataclass(frozen=True)
class ContainerView:
    """One container as the node last saw it."""

    name: str
    image: str
    state: State
    ready: bool = False
    restart_count: int = 0
    last_state: Terminated | None = None
    # Whether the container will run again after it ended (restartPolicy).
    will_restart: bool = False
    process_id: int | None = None


@dataclass(frozen=True)
class PodView:
    """What the node knows of a pod beyond its spec."""

    containers: tuple[ContainerView, ...]
    pod_ip: str
    host_ip: str
    started_at: datetime
    # The pod's directory and volumes exist (the sandbox): PodReadyToStartContainers.
    sandbox_ready: bool = True
    # The pod was stopped for good (deleted, evicted, node shutdown): nothing restarts.
    stopped: bool = False
    # Set with `stopped` by a node shutdown: the pod-level reason and message.
    reason: str = ""
    message: str = ""
    extra_conditions: tuple[Json, ...] = field(default_factory=tuple)
    init_containers: tuple[ContainerView, ...] = ()


def _succeeded(c: ContainerView) -> bool:
    return isinstance(c.state, Terminated) and c.state.exit_code == 0


def initialized(view: PodView) -> bool:
    """Every init container has exited 0."""
    return all(_succeeded(c) for c in view.init_containers)


def _init_failed(view: PodView) -> bool:
    """An init container ended with an error and will not run again."""
    return any(
        isinstance(c.state, Terminated)
        and c.state.exit_code != 0
        and (view.stopped or not c.will_restart)
        for c in view.init_containers
    )


def phase(view: PodView) -> str:
    if _init_failed(view):
        return "Failed"
    if not initialized(view):
        return "Failed" if view.stopped else "Pending"
    states = [c.state for c in view.containers]
    restarting = any(c.will_restart and not view.stopped for c in view.containers)
    if all(isinstance(s, Terminated) for s in states) and not restarting:
        codes = [s.exit_code for s in states if isinstance(s, Terminated)]
        return "Succeeded" if all(code == 0 for code in codes) else "Failed"
    never_ran = [
        c for c in view.containers if isinstance(c.state, Waiting) and c.last_state is None
    ]
    if view.stopped and all(isinstance(s, Terminated | Waiting) for s in states):
        return "Failed"
    return "Pending" if never_ran else "Running"


def pod_status(pod: Json, view: PodView, now: datetime) -> Json:
    old: Json = pod.get("status") or {}
    new = {k: v for k, v in old.items() if k not in ("reason", "message")}
    current = phase(view)
    new["phase"] = current
    new["hostIP"] = view.host_ip
    new["hostIPs"] = [{"ip": view.host_ip}]
    new["podIP"] = view.pod_ip
    new["podIPs"] = [{"ip": view.pod_ip}]
    new["startTime"] = old.get("startTime") or format_time(view.started_at)
    if view.reason:
        new["reason"] = view.reason
        new["message"] = view.message
    new["containerStatuses"] = [_container_status(c) for c in view.containers]
    if view.init_containers:
        new["initContainerStatuses"] = [_container_status(c) for c in view.init_containers]
    new["conditions"] = _conditions(old, view, current, now)
    return new


def _conditions(old: Json, view: PodView, current: str, now: datetime) -> list[Json]:
    ended = current in ("Succeeded", "Failed")
    all_ready = bool(view.containers) and all(c.ready for c in view.containers) and not ended
    reasons = {} if all_ready else {"reason": "PodCompleted" if ended else "ContainersNotReady"}
    wanted: dict[str, tuple[bool, Mapping[str, str]]] = {
        "PodReadyToStartContainers": (view.sandbox_ready and not ended, {}),
        "Initialized": (
            initialized(view),
            {} if initialized(view) else {"reason": "ContainersNotInitialized"},
        ),
        "ContainersReady": (all_ready, reasons),
        "Ready": (all_ready, reasons),
    }
    previous = {c.get("type"): c for c in old.get("conditions") or []}
    kept = [c for c in old.get("conditions") or [] if c.get("type") not in OWNED_CONDITIONS]
    kept += [c for c in view.extra_conditions if c.get("type") not in previous]
    stamp = format_time(now)
    for kind, (value, extra) in wanted.items():
        text = "True" if value else "False"
        before = previous.get(kind)
        since = (
            before.get("lastTransitionTime") if before and before.get("status") == text else None
        )
        kept.append(
            {"type": kind, "status": text, "lastProbeTime": None}
            | dict(extra)
            | {"lastTransitionTime": since or stamp}
        )
    return kept


def _container_status(c: ContainerView) -> Json:
    status: Json = {
        "name": c.name,
        "image": c.image,
        "imageID": "",
        "ready": c.ready,
        "restartCount": c.restart_count,
        "started": isinstance(c.state, Running),
        "state": _state(c.state),
        "lastState": _state(c.last_state) if c.last_state else {},
    }
    if c.process_id is not None:
        status["containerID"] = f"process://{c.process_id}"
    return status


def _state(state: State) -> Json:
    if isinstance(state, Waiting):
        waiting: Json = {"reason": state.reason}
        if state.message:
            waiting["message"] = state.message
        return {"waiting": waiting}
    if isinstance(state, Running):
        return {"running": {"startedAt": format_time(state.started_at)}}
    terminated: Json = {
        "exitCode": state.exit_code,
        "reason": state.shown_reason,
        "finishedAt": format_time(state.finished_at),
    }
    if state.started_at is not None:
        terminated["startedAt"] = format_time(state.started_at)
    if state.message:
        terminated["message"] = state.message
    return {"terminated": terminated}
