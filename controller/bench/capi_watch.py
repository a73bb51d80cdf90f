"""What `captf bench capi` sees from outside, on its own watches: when each Machine
appeared, its phase, its TerraformMachine, and when each Job of a TerraformMachine
appeared and finished. From these: Machine created -> its apply Job created, the Jobs
per Machine each way, and how many Jobs ran at each moment (whether a run slot was free
while a Machine waited)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from controller.core.basics.names import ANN_ACCOUNTED, LABEL_KIND, LABEL_NAME, LABEL_OP, MACHINE
from runtime.jsonobj import Json

DEPLOYMENT_LABEL = "cluster.x-k8s.io/deployment-name"


@dataclass
class Seen:
    """Times (this process's monotonic clock) and facts from the watches."""

    deployment: str
    machines: dict[str, float] = field(default_factory=dict)  # Machine -> first seen
    phases: dict[str, str] = field(default_factory=dict)  # Machine -> phase, while it exists
    owners: dict[str, str] = field(default_factory=dict)  # TerraformMachine -> its Machine
    infra: set[str] = field(default_factory=set)  # TerraformMachines that exist now
    # TerraformMachine -> when first seen, when first seen owned, and each status.next
    # reason it showed with when (where a Machine's wait went)
    infra_seen: dict[str, float] = field(default_factory=dict)
    owned_at: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    # (TerraformMachine, op) -> names of its Jobs seen; Job -> first seen, finished
    jobs: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    job_seen: dict[str, float] = field(default_factory=dict)
    job_done: dict[str, float] = field(default_factory=dict)
    # Job -> first seen accounted (captf.io/accounted) or gone: its run slot is free by
    # then (the accounting pass frees it just before the mark)
    job_freed: dict[str, float] = field(default_factory=dict)

    def machine(self, old: Json | None, new: Json | None) -> None:
        obj = new or old
        assert obj is not None
        if (obj["metadata"].get("labels") or {}).get(DEPLOYMENT_LABEL) != self.deployment:
            return
        name = obj["metadata"]["name"]
        if new is None:
            self.phases.pop(name, None)
            return
        self.machines.setdefault(name, time.monotonic())
        self.phases[name] = str((new.get("status") or {}).get("phase") or "")

    def terraform_machine(self, old: Json | None, new: Json | None) -> None:
        obj = new or old
        assert obj is not None
        name = obj["metadata"]["name"]
        if new is None:
            self.infra.discard(name)
            return
        self.infra.add(name)
        now = time.monotonic()
        self.infra_seen.setdefault(name, now)
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Machine":
                self.owners[name] = str(ref["name"])
                self.owned_at.setdefault(name, now)
        reason = str(((new.get("status") or {}).get("next") or {}).get("reason") or "")
        shown = self.reasons.setdefault(name, [])
        if reason and (not shown or shown[-1][1] != reason):
            shown.append((now, reason))

    def job(self, old: Json | None, new: Json | None) -> None:
        if new is None:  # pruned: it runs no more
            if old is not None:
                self.job_done.setdefault(old["metadata"]["name"], time.monotonic())
                self.job_freed.setdefault(old["metadata"]["name"], time.monotonic())
            return
        labels = new["metadata"].get("labels") or {}
        name = new["metadata"]["name"]
        self.job_seen.setdefault(name, time.monotonic())
        if _finished(new):
            self.job_done.setdefault(name, time.monotonic())
        if ANN_ACCOUNTED in (new["metadata"].get("annotations") or {}):
            self.job_freed.setdefault(name, time.monotonic())
        if labels.get(LABEL_KIND) == MACHINE:
            key = (str(labels.get(LABEL_NAME)), str(labels.get(LABEL_OP)))
            self.jobs.setdefault(key, set()).add(name)

    def running(self, phase: str = "Running") -> int:
        return sum(1 for p in self.phases.values() if p == phase)

    def jobs_per_machine(self, op: str, machines: set[str]) -> dict[str, int]:
        """Of the TerraformMachines of `machines`: how many had 0, 1, 2 ... `op` Jobs."""
        counts: dict[str, int] = {}
        for infra, machine in self.owners.items():
            if machine in machines:
                n = str(len(self.jobs.get((infra, op), ())))
                counts[n] = counts.get(n, 0) + 1
        return dict(sorted(counts.items()))

    def machine_to_job(self, slots: int) -> tuple[list[float], list[float], list[float]]:
        """Seconds from each Machine's appearance to its apply Job's: all; those of the
        Machines that waited while fewer than `slots` Jobs ran throughout; and those
        that waited while fewer than `slots` Jobs held a run slot (created to accounted:
        a finished Job holds its slot until the controller accounts it)."""
        every, free, unheld = [], [], []
        for infra, machine in self.owners.items():
            names = self.jobs.get((infra, "apply"))
            if not names or machine not in self.machines:
                continue
            start, end = self.machines[machine], min(self.job_seen[n] for n in names)
            every.append(end - start)
            if self._most_running(start, end, self.job_done) < slots:
                free.append(end - start)
            if self._most_running(start, end, self.job_freed) < slots:
                unheld.append(end - start)
        return every, free, unheld

    def finished_to_accounted(self) -> list[float]:
        """Seconds each Job held its run slot after it finished: until it was accounted."""
        return [
            self.job_freed[name] - done
            for name, done in self.job_done.items()
            if name in self.job_freed and self.job_freed[name] >= done
        ]

    def breakdown(self) -> dict[str, Any]:
        """Medians, seconds, of a Machine's way to its apply Job: Machine -> its
        TerraformMachine seen, -> owned, -> the Job; and the seconds spent showing each
        status.next reason before the Job, summed over Machines."""
        steps: dict[str, list[float]] = {
            "machine_to_infra": [],
            "infra_to_owned": [],
            "owned_to_job": [],
        }
        spent: dict[str, float] = {}
        for infra, machine in self.owners.items():
            names = self.jobs.get((infra, "apply"))
            if not names or machine not in self.machines or infra not in self.owned_at:
                continue
            job = min(self.job_seen[n] for n in names)
            steps["machine_to_infra"].append(self.infra_seen[infra] - self.machines[machine])
            steps["infra_to_owned"].append(self.owned_at[infra] - self.infra_seen[infra])
            steps["owned_to_job"].append(job - self.owned_at[infra])
            shown = [r for r in self.reasons.get(infra, []) if r[0] < job]
            for (at, reason), until in zip(shown, [*(r[0] for r in shown[1:]), job], strict=True):
                spent[reason] = round(spent.get(reason, 0.0) + until - at, 2)
        medians = {k: percentile(v, 50) for k, v in steps.items()}
        return {"median_s": medians, "reason_s": dict(sorted(spent.items()))}

    def _most_running(self, start: float, end: float, ended: dict[str, float]) -> int:
        """The most Jobs running at any moment in [start, end), each from its creation to
        its time in `ended`."""
        events = sorted(
            [(t, 1) for t in self.job_seen.values()] + [(t, -1) for t in ended.values()]
        )
        running, most = 0, None
        for at, change in events:
            if at >= end:
                break
            if at >= start and most is None:
                most = running  # those running when the Machine appeared
            running += change
            if most is not None:
                most = max(most, running)
        return running if most is None else most


def _finished(job: Json) -> bool:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return True
    return False


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank), seconds rounded to ms; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered), math.ceil(q / 100 * len(ordered))) - 1)
    return round(ordered[rank], 3)
