"""What `captf bench capi` computes from its watches (controller/bench/capi_watch.py):
Machine -> apply Job latencies, split by whether a run slot was free throughout; Jobs
per Machine each way; the nearest-rank percentile."""

from __future__ import annotations

import pytest

from controller.bench.capi_watch import Seen, percentile


def seen_with(jobs: dict[str, tuple[float, float | None]]) -> Seen:
    seen = Seen("md")
    for name, (start, end) in jobs.items():
        seen.job_seen[name] = start
        if end is not None:
            seen.job_done[name] = end
    return seen


@pytest.mark.parametrize(
    ("start", "end", "most"),
    [
        (0.0, 1.0, 0),  # before any Job
        (10.5, 11.0, 2),  # two running the whole time
        (14.0, 16.0, 2),  # a third starts at 15 as one ends at 15
        (19.0, 30.0, 4),  # b and c, then d and e from 20
        (40.0, 50.0, 1),  # e never ended
    ],
)
def test_the_most_jobs_running_while_a_machine_waits(start: float, end: float, most: int) -> None:
    seen = seen_with(
        {
            "a": (10.0, 15.0),
            "b": (10.0, 35.0),
            "c": (15.0, 36.0),
            "d": (20.0, 37.0),
            "e": (20.0, None),
        }
    )
    assert seen._most_running(start, end, seen.job_done) == most


def test_latencies_count_the_machines_that_waited_with_a_slot_free() -> None:
    seen = seen_with({"j1": (2.0, 9.0), "j2": (3.5, 9.0), "other": (1.0, 2.5)})
    seen.job_freed = {"j1": 9.5, "j2": 9.5, "other": 3.2}  # accounted after it finished
    seen.machines = {"m1": 1.5, "m2": 3.0}
    seen.owners = {"t1": "m1", "t2": "m2"}
    seen.jobs = {("t1", "apply"): {"j1"}, ("t2", "apply"): {"j2"}}
    every, free, unheld = seen.machine_to_job(slots=2)
    assert every == pytest.approx([0.5, 0.5])
    # m1 waited while "other" ran alone; m2 appeared after "other" ended: both had a slot
    assert free == pytest.approx([0.5, 0.5])
    # but "other" held its slot until accounted at 3.2: m2 waited with both slots held
    assert unheld == pytest.approx([0.5])
    assert seen.finished_to_accounted() == pytest.approx([0.5, 0.5, 0.7])
    assert seen.jobs_per_machine("apply", {"m1", "m2"}) == {"1": 2}
    assert seen.jobs_per_machine("destroy", {"m1", "m2"}) == {"0": 2}


def test_percentiles_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99)) == (50.0, 99.0)
    assert percentile([], 50) is None
    assert percentile([0.25], 99) == 0.25
