"""Where the bench's reconciles went (controller/bench/capi_reconciles.py): the counter
by kind and trigger from /metrics pages, per Machine between two scrapes, and the work
queue's mean wait and work."""

from __future__ import annotations

import pytest

from controller.bench.capi_reconciles import breakdown, page_counts, queue_means


def page(machines_jobs: float, self_: float, wait: tuple[float, float]) -> str:
    return f"""\
# HELP captf_reconciles_total Reconciles
# TYPE captf_reconciles_total counter
captf_reconciles_total{{kind="TerraformMachine",trigger="jobs"}} {machines_jobs}
captf_reconciles_total{{kind="TerraformMachine",trigger="self"}} {self_}
captf_reconciles_total{{kind="TerraformCluster",trigger="terraformmachines"}} 2.0
# HELP workqueue_queue_duration_seconds How long
# TYPE workqueue_queue_duration_seconds histogram
workqueue_queue_duration_seconds_bucket{{name="captf",le="+Inf"}} {wait[1]}
workqueue_queue_duration_seconds_sum{{name="captf"}} {wait[0]}
workqueue_queue_duration_seconds_count{{name="captf"}} {wait[1]}
# HELP controller_runtime_reconcile_total Total
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{{controller="captf",result="success"}} 99.0
"""


def test_the_reconciles_between_two_scrapes_per_machine_by_kind_and_trigger() -> None:
    before = page_counts(page(10.0, 4.0, (1.0, 10.0)))
    after = page_counts(page(50.0, 24.0, (7.0, 40.0)))
    found = breakdown(before, after, machines=20)
    assert found["kind"] == {"TerraformMachine": 3.0}  # the cluster's did not move
    assert found["trigger"] == {"jobs": 2.0, "self": 1.0}
    assert found["kind_trigger"] == {"TerraformMachine<-jobs": 2.0, "TerraformMachine<-self": 1.0}
    assert queue_means(before, after) == {
        "wait_mean_s": pytest.approx(0.2),
        "work_mean_s": None,  # not on the page
    }
