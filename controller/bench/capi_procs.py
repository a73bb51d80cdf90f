"""What `captf bench capi` reads of the processes it measures: CPU seconds from
/proc/<pid>/stat (utime + stime, and with `children` the cutime + cstime of the children
it has waited for), memory from /proc/<pid>/status, the controller replicas' pids from
their pods (the process node reports `process://<pid>` as the container ID), and the
CPU of this process's own children that have ended (the runner pods the node ran, and
the OpenTofu they ran; the bare `tofu` runs)."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field
from pathlib import Path

from runtime.jsonobj import Json


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """utime + stime (+ cutime + cstime) of a process; 0 once it has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # The command name, in parentheses, may hold spaces: count fields after its end.
    fields = stat.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def memory_mib(pid: int, field_name: str) -> float:
    """VmRSS or VmHWM (the high-water mark) of a process, MiB; 0 once it has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    for line in status.splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def ended_children_cpu() -> float:
    """CPU seconds of this process's children that have ended and been waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def pod_pid(pod: Json) -> int | None:
    """The process of a pod's first container on the process node."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        found = str(status.get("containerID") or "")
        if found.startswith("process://"):
            return int(found.removeprefix("process://"))
    return None


@dataclass
class Meter:
    """CPU seconds by process group, lap by lap. `groups`: name -> pids (summed; `add`
    more as they appear: a controller replica that restarts is a new process);
    `children`: the names whose waited-for children count too (our controller's). Each
    process's last reading is kept once it has ended, so `sample` it often: what a
    process used after its last sample is lost (and counted as this process's ended
    children, `runners`, when the node reaps it)."""

    groups: dict[str, tuple[int, ...]]
    children: frozenset[str] = frozenset()
    _used: dict[tuple[str, int], float] = field(default_factory=dict)
    _peak: dict[int, float] = field(default_factory=dict)
    _last: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._last = self._read()

    def add(self, name: str, pid: int) -> None:
        if pid not in self.groups.get(name, ()):
            self.groups[name] = (*self.groups.get(name, ()), pid)

    def sample(self) -> None:
        for name, pids in self.groups.items():
            for pid in pids:
                used = cpu_seconds(pid, children=name in self.children)
                key = (name, pid)
                self._used[key] = max(self._used.get(key, 0.0), used)
                self._peak[pid] = max(self._peak.get(pid, 0.0), memory_mib(pid, "VmHWM"))

    def lap(self) -> dict[str, float]:
        now = self._read()
        used = {name: round(now[name] - self._last.get(name, 0.0), 2) for name in now}
        self._last = now
        return used

    def processes(self, name: str) -> int:
        """How many processes the group has had: more than at the start is a restart."""
        return len(self.groups.get(name, ()))

    def peak_mib(self, name: str) -> float:
        return max((self._peak.get(pid, 0.0) for pid in self.groups.get(name, ())), default=0.0)

    def _read(self) -> dict[str, float]:
        self.sample()
        read = {
            name: sum(self._used.get((name, pid), 0.0) for pid in pids)
            for name, pids in self.groups.items()
        }
        read["runners"] = ended_children_cpu()
        return read
