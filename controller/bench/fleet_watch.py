"""What `captf bench fleet` sees from outside, on its own watches: each Machine's
appearance and phase, its TerraformMachine, every CAPTF Job (its object's kind, its op,
when it appeared and ended), every runner pod's appearance, and the run slots' holders,
sampled. From these: a change's wait for its Job, Jobs and pods per hour by kind, and
how many slots each class of Job held.

A Job's class is its op's: `drift` and `refresh` are background (a health re-read, a
pool's membership re-read, a refresh after an apply, a scheduled refresh), the rest
carry out a change. Its kind for the report is what it reads: `health` (a machine's
refresh), `membership` (a pool's), `refresh` (a cluster's), `drift`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from controller.bench.capi_watch import percentile
from controller.core.basics.names import LABEL_KIND, LABEL_NAME, LABEL_OP, MACHINE, POOL, Op
from controller.core.leases.family import holder_of
from controller.core.leases.slots import is_run_slot
from runtime.jsonobj import Json

BACKGROUND_OPS = frozenset({Op.DRIFT, Op.REFRESH})
_REFRESH_KIND = {MACHINE: "health", POOL: "membership"}


def kind_of(labels: dict[str, str]) -> str:
    """The report's kind of a Job from its labels (see the module)."""
    op = labels.get(LABEL_OP, "")
    if op == Op.REFRESH:
        return _REFRESH_KIND.get(labels.get(LABEL_KIND, ""), "refresh")
    return op


def is_background(labels: dict[str, str]) -> bool:
    return labels.get(LABEL_OP, "") in BACKGROUND_OPS


@dataclass
class Fleet:
    """Times (this process's monotonic clock) and facts from the watches."""

    machines: dict[str, float] = field(default_factory=dict)  # Machine -> first seen
    phases: dict[str, str] = field(default_factory=dict)  # Machine -> phase, while it exists
    owners: dict[str, str] = field(default_factory=dict)  # TerraformMachine -> its Machine
    job_seen: dict[str, float] = field(default_factory=dict)
    job_done: dict[str, float] = field(default_factory=dict)
    job_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    pod_seen: dict[str, float] = field(default_factory=dict)
    slots: dict[str, str] = field(default_factory=dict)  # run slot -> holder Job ("" free)
    # (time, background slots held, change slots held), one a sample
    occupancy: list[tuple[float, int, int]] = field(default_factory=list)

    def machine(self, old: Json | None, new: Json | None) -> None:
        obj = new or old
        assert obj is not None
        name = obj["metadata"]["name"]
        if new is None:
            self.phases.pop(name, None)
            return
        self.machines.setdefault(name, time.monotonic())
        self.phases[name] = str((new.get("status") or {}).get("phase") or "")

    def terraform_machine(self, old: Json | None, new: Json | None) -> None:
        if new is None:
            return
        for ref in new["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Machine":
                self.owners[new["metadata"]["name"]] = str(ref["name"])

    def job(self, old: Json | None, new: Json | None) -> None:
        obj = new or old
        assert obj is not None
        name = obj["metadata"]["name"]
        if new is None:
            self.job_done.setdefault(name, time.monotonic())
            return
        self.job_seen.setdefault(name, time.monotonic())
        self.job_labels.setdefault(name, dict(new["metadata"].get("labels") or {}))
        conditions = (new.get("status") or {}).get("conditions") or []
        if any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in conditions
        ):
            self.job_done.setdefault(name, time.monotonic())

    def pod(self, old: Json | None, new: Json | None) -> None:
        if new is not None and LABEL_OP in (new["metadata"].get("labels") or {}):
            self.pod_seen.setdefault(new["metadata"]["name"], time.monotonic())

    def lease(self, old: Json | None, new: Json | None) -> None:
        obj = new or old
        assert obj is not None
        if is_run_slot(obj):
            self.slots[obj["metadata"]["name"]] = holder_of(new) if new is not None else ""

    def sample(self) -> None:
        """The slots' holders now, by class (a holder the watch has not seen yet counts as
        a change: the scale-up's applies are the Jobs that start fastest)."""
        background = change = 0
        for holder in self.slots.values():
            if not holder:
                continue
            if is_background(self.job_labels.get(holder, {})):
                background += 1
            else:
                change += 1
        self.occupancy.append((time.monotonic(), background, change))

    def running(self) -> int:
        return sum(1 for phase in self.phases.values() if phase == "Running")

    def jobs_running(self) -> int:
        return sum(1 for name in self.job_seen if name not in self.job_done)

    def jobs_between(self, start: float, end: float) -> dict[str, int]:
        """Jobs that appeared in [start, end), by kind."""
        counts: dict[str, int] = {}
        for name, seen in self.job_seen.items():
            if start <= seen < end:
                kind = kind_of(self.job_labels.get(name, {}))
                counts[kind] = counts.get(kind, 0) + 1
        return dict(sorted(counts.items()))

    def pods_between(self, start: float, end: float) -> int:
        return sum(1 for seen in self.pod_seen.values() if start <= seen < end)

    def occupancy_between(self, start: float, end: float, slots: int) -> dict[str, Any]:
        """Mean slots held by each class over the samples in [start, end), the share of
        samples with every slot held, and the most background ever held."""
        taken = [(b, c) for at, b, c in self.occupancy if start <= at < end]
        if not taken:
            return {}
        n = len(taken)
        return {
            "background_mean": round(sum(b for b, _ in taken) / n, 2),
            "change_mean": round(sum(c for _, c in taken) / n, 2),
            "background_max": max(b for b, _ in taken),
            "all_held_share": round(sum(1 for b, c in taken if b + c >= slots) / n, 3),
            "samples": n,
        }

    def most_background_in(self, start: float, end: float, window: float) -> int:
        """The most background Jobs that appeared within any `window` seconds of [start,
        end): what a budget a minute bounds, `window` being a controller minute."""
        seen = sorted(
            at
            for name, at in self.job_seen.items()
            if start <= at < end and is_background(self.job_labels.get(name, {}))
        )
        most, first = 0, 0
        for last, at in enumerate(seen):
            while at - seen[first] >= window:
                first += 1
            most = max(most, last - first + 1)
        return most

    def read_gaps(self, start: float, end: float) -> list[float]:
        """For each TerraformMachine read during [start, end) (a refresh, or a drift check,
        which reads its health too), the longest time without a read: from the start to
        its first, between two, from its last to the end."""
        reads: dict[str, list[float]] = {}
        for name, at in self.job_seen.items():
            labels = self.job_labels.get(name, {})
            if labels.get(LABEL_KIND) == MACHINE and is_background(labels) and start <= at < end:
                reads.setdefault(labels.get(LABEL_NAME, ""), []).append(at)
        gaps = []
        for times in reads.values():
            points = [start, *sorted(times), end]
            gaps.append(max(b - a for a, b in pairwise(points)))
        return gaps

    def waits(self, machines: set[str]) -> dict[str, Any]:
        """Seconds from each of `machines` appearing to its apply Job appearing."""
        first_apply: dict[str, float] = {}
        for name, seen in self.job_seen.items():
            labels = self.job_labels.get(name, {})
            if labels.get(LABEL_KIND) != MACHINE or labels.get(LABEL_OP) != Op.APPLY:
                continue
            infra = labels.get(LABEL_NAME, "")
            first_apply[infra] = min(seen, first_apply.get(infra, seen))
        waited = [
            first_apply[infra] - self.machines[machine]
            for infra, machine in self.owners.items()
            if machine in machines and infra in first_apply and machine in self.machines
        ]
        return {
            "p50": percentile(waited, 50),
            "p99": percentile(waited, 99),
            "count": len(waited),
            "machines": len(machines),
        }
