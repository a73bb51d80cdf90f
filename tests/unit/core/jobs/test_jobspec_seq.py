"""Attempt sequences: a Job deleted while it ran never lends its name to its successor."""

from __future__ import annotations

from controller.core.jobs.naming import fresh_seq, job_name, next_seq
from runtime.jsonobj import Json

UID = "0b6c3f9e-1111-4222-8333-444455556666"


def _job(seq: int, op: str = "apply") -> Json:
    return {
        "metadata": {
            "name": job_name("c1", UID, op, seq),
            "labels": {"captf.io/op": op},
            "annotations": {"captf.io/seq": str(seq)},
        }
    }


def test_without_gone_jobs_it_is_next_seq() -> None:
    jobs = [_job(1), _job(2), _job(7, "drift")]
    assert fresh_seq("c1", UID, jobs, "apply", ()) == next_seq(jobs, "apply") == 3
    assert fresh_seq("c1", UID, jobs, "drift", ()) == 8


def test_the_name_of_a_deleted_job_is_skipped() -> None:
    # seq 2 ran and was deleted: only seq 1 is left, so next_seq would name seq 2 again.
    jobs = [_job(1)]
    deleted = job_name("c1", UID, "apply", 2)
    assert next_seq(jobs, "apply") == 2
    assert fresh_seq("c1", UID, jobs, "apply", {deleted}) == 3
    # Every deleted name on the way is skipped; the same inputs give the same answer.
    twice = {deleted, job_name("c1", UID, "apply", 3)}
    assert fresh_seq("c1", UID, jobs, "apply", twice) == 4
    assert fresh_seq("c1", UID, jobs, "apply", twice) == 4


def test_gone_names_of_other_ops_or_objects_do_not_matter() -> None:
    others = {job_name("c1", UID, "drift", 1), job_name("c2", UID, "apply", 1)}
    assert fresh_seq("c1", UID, [], "apply", others) == 1
