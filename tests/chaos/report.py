"""The checks, as pure functions of what the observer recorded, and the one-line report.

Intervals are in etcd revisions (see observer.py): a Job runs from the revision of its
create to the revision at which it was first seen terminal or deleted. Two Jobs overlap
when each was created before the other ended."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.core.jobs.job import Outcome, classify, result
from controller.core.plan.accounting import (
    APPLIED,
    DESTROYED,
    DRIFT_DETECTED,
    DRIFT_REMEDIATED,
    PLAN_READY,
    RESTORED,
)
from runtime.jsonobj import Json
from tests.chaos.observer import INFINITY, EventRecord, JobRecord

EXAMPLES = 5
# The reasons of the Events bookkeeping emits for a finished Job. Other Events may carry a
# Job's name too (RetryCapped is named after the Job that hit the cap).
OUTCOME_REASONS = frozenset(
    {"JobFailed", "JobDeadlineExceeded", "JobInterrupted", "DestructivePlanBlocked"}
    | {APPLIED, DRIFT_DETECTED, DRIFT_REMEDIATED, DESTROYED, RESTORED, PLAN_READY}
)
# Successful ops that owe an Event (a drift check only when it found drift).
SUCCESS_EVENT_OPS = frozenset({"apply", "plan", "destroy", "restore"})


@dataclass(frozen=True)
class Owner:
    """What the checks need of a CAPTF object: its family (the cluster's name) and role."""

    name: str
    family: str
    is_cluster: bool


CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"


def owner_of(obj: Json) -> Owner:
    """The family of a CAPTF object: a TerraformCluster's own name; a member's, the Cluster
    its `cluster.x-k8s.io/cluster-name` label names (the workload names each Cluster after
    its TerraformCluster)."""
    meta = obj["metadata"]
    is_cluster = obj["kind"] == "TerraformCluster"
    label = (meta.get("labels") or {}).get(CLUSTER_NAME_LABEL)
    family = meta["name"] if is_cluster or not label else str(label)
    return Owner(meta["name"], family, is_cluster)


def overlapping(a: JobRecord, b: JobRecord) -> bool:
    return a.start < b.end and b.start < a.end


def overlaps(jobs: Iterable[JobRecord], owners: Mapping[str, Owner]) -> tuple[list[str], list[str]]:
    """(same object, cluster/member) overlapping pairs, described; exact intervals only."""
    exact = sorted((j for j in jobs if j.exact), key=lambda j: j.start)
    same: list[str] = []
    family: list[str] = []
    for i, a in enumerate(exact):
        for b in exact[i + 1 :]:
            if b.start >= a.end:
                break
            oa, ob = owners.get(a.owner), owners.get(b.owner)
            if a.owner == b.owner:
                same.append(f"{_describe(a)} / {_describe(b)}")
            elif (
                oa is not None
                and ob is not None
                and oa.family == ob.family
                and (oa.is_cluster or ob.is_cluster)
            ):
                family.append(f"{_describe(a)} / {_describe(b)}")
    return same, family


def _end(job: JobRecord) -> str:
    return "running" if job.end == INFINITY else str(job.end)


def max_concurrent(jobs: Iterable[JobRecord]) -> tuple[int, list[str]]:
    """The most Jobs running at one revision (exact intervals only), and which they were
    the first time that many ran."""
    exact = {j.uid: j for j in jobs if j.exact}
    # At one revision an end comes before a start: they cannot be the same write.
    edges = sorted(
        [(j.start, 1, j.uid) for j in exact.values()] + [(j.end, -1, j.uid) for j in exact.values()]
    )
    running: set[str] = set()
    peak: list[str] = []
    for _, step, uid in edges:
        if step < 0:
            running.discard(uid)
            continue
        running.add(uid)
        if len(running) > len(peak):
            peak = sorted(_describe(exact[u]) for u in running)
    return len(peak), peak


def _describe(job: JobRecord) -> str:
    return f"{job.name}@{job.start}-{_end(job)}"


def expected_events(job: JobRecord) -> int:
    """How many Events bookkeeping owes a finished Job: one for a failure with a reason,
    one for a success that changed or found something (controller/core/plan/accounting.py)."""
    if job.ended not in ("Complete", "Failed"):
        return 0
    verdict = classify(job.last)
    if verdict.event is not None:
        return 1
    if verdict.outcome != Outcome.SUCCESS:
        return 0
    if job.op == "drift":
        return 1 if (result(job.last) or {}).get("drift") else 0
    return 1 if job.op in SUCCESS_EVENT_OPS else 0


def events_by_incarnation(
    jobs: Sequence[JobRecord], events: Iterable[EventRecord]
) -> dict[str, list[EventRecord]]:
    """Each outcome Event named after a Job (`<job>.<reason>`), given to the incarnation of
    that name it belongs to: the one whose uid it carries, else the newest created before
    it."""
    by_name: defaultdict[str, list[JobRecord]] = defaultdict(list)
    for j in jobs:
        by_name[j.name].append(j)
    out: dict[str, list[EventRecord]] = {j.uid: [] for j in jobs}
    for ev in events:
        if ev.reason not in OUTCOME_REASONS:
            continue
        candidates = sorted(_named_after(ev.name, by_name), key=lambda j: j.start)
        if not candidates:
            continue
        named = [j for j in candidates if _carries(ev, j.uid)]
        before = [j for j in candidates if j.start < ev.first_rv]
        owner = named[0] if named else (before[-1] if before else None)
        if owner is not None:
            out[owner.uid].append(ev)
    return out


def _named_after(event: str, by_name: Mapping[str, list[JobRecord]]) -> list[JobRecord]:
    """The Jobs whose name the Event's name starts with, up to a `.` or `-`."""
    for i, ch in enumerate(event):
        if ch in ".-" and event[:i] in by_name:
            return by_name[event[:i]]
    return []


def _carries(ev: EventRecord, uid: str) -> bool:
    """The Event names the incarnation: its uid (or the uid's first block) in the Event's
    name or an annotation."""
    short = uid.split("-", 1)[0]
    texts = [ev.name, *ev.annotations.values()]
    return any(uid in t or (len(short) >= 8 and short in t) for t in texts)


def accounting(jobs: Sequence[JobRecord], events: Iterable[EventRecord]) -> Json:
    """Events per accounted Job, by uid: missing, duplicated, or not owed; and finished
    Jobs left unaccounted."""
    matched = events_by_incarnation(jobs, events)
    missing, duplicated, unowed = [], [], []
    finished = [j for j in jobs if j.ended in ("Complete", "Failed")]
    # A Job deleted before it was accounted (an operator racing the controller) owes
    # nothing; one that still exists unaccounted at the end is a defect.
    unaccounted = [j.name for j in finished if not j.accounted and not j.gone]
    for j in (j for j in finished if j.accounted):
        got, owed = len(matched[j.uid]), expected_events(j)
        if got < owed:
            missing.append(j.name)
        elif got > owed == 1:
            duplicated.append(j.name)
        elif got > owed:
            unowed.append(j.name)
    reused = Counter(j.name for j in jobs)
    return {
        "finished_jobs": len(finished),
        "events_owed": sum(expected_events(j) for j in finished if j.accounted),
        "events_missing": len(missing),
        "events_duplicated": len(duplicated),
        "events_not_owed": len(unowed),
        "unaccounted_jobs": len(unaccounted),
        "reused_job_names": sum(1 for n in reused.values() if n > 1),
        "examples": (missing + duplicated + unowed + unaccounted)[:EXAMPLES],
    }


def seconds_summary(values: Sequence[float | None], target: float) -> Json:
    """Count, median, max and how many missed `target` (None: no handover seen at all)."""
    seen = [v for v in values if v is not None]
    return {
        "n": len(values),
        "p50": round(statistics.median(seen), 2) if seen else None,
        "max": round(max(seen), 2) if seen else None,
        "over_target": sum(1 for v in values if v is None or v > target),
        "target": target,
    }


def converged(obj: Json, running_owners: set[str]) -> bool:
    """Ready for its current generation, no Job active or running."""
    meta, status = obj["metadata"], obj.get("status") or {}
    if meta["uid"] in running_owners or status.get("activeJob"):
        return False
    if status.get("observedGeneration") != meta.get("generation"):
        return False
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return bool(ready) and ready[0].get("status") == "True"
