"""Job names: deterministic, so the same decision made twice names the same Job.

`<name>-<op>-<hash8>` with hash8 taken from (uid, op, attempt sequence). Made twice
before the cache shows the first Job, the second create is refused by the API server:
no Job is ever created twice."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable

from controller.core.basics.names import JOB_NAME_LIMIT
from controller.core.jobs.job import op_of, seq_of
from runtime.jsonobj import Json


def job_name(name: str, uid: str, op: str, seq: int) -> str:
    """`<name>-<op>-<hash8>`, the name cut as needed to fit JOB_NAME_LIMIT, as the CronJob
    controller cuts its Jobs' names. The hash covers the uid, so two objects whose names
    share the kept part still name different Jobs."""
    digest = hashlib.sha256(f"{uid}/{op}/{seq}".encode()).hexdigest()[:8]
    suffix = f"-{op}-{digest}"
    # A cut must not leave `-` or `.` before the suffix: `a.-apply` is no DNS name.
    kept = name[: JOB_NAME_LIMIT - len(suffix)].rstrip("-.")
    return f"{kept}{suffix}"


def next_seq(jobs: Iterable[Json], op: str) -> int:
    """One more than the highest attempt sequence among the object's Jobs of that op."""
    seqs = [seq_of(j) for j in jobs if op_of(j) == op]
    return max(seqs, default=0) + 1


def fresh_seq(name: str, uid: str, jobs: Iterable[Json], op: str, gone: Collection[str]) -> int:
    """next_seq, skipping any sequence whose Job name is in `gone` (Jobs known to have been
    deleted while they ran). A deleted Job lowers the highest sequence left, and its
    successor must not take its name: the record that names the deleted Job would then
    name the new one, and its Events (named after the Job) would be refused as duplicates.
    `gone` comes from durable records, so a replayed decision still names the same Job."""
    seq = next_seq(jobs, op)
    while job_name(name, uid, op, seq) in gone:
        seq += 1
    return seq
