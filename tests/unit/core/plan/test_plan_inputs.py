"""The plan from its three inputs: the Settings shape the Launch, the Facts' refusal streak
becomes the wait and the one Warning, and a Lease found held waits what the plan says."""

from __future__ import annotations

from datetime import timedelta

from controller.cli.decide_settings import settings_for
from controller.cli.main import parser
from controller.core.decide import snapshot
from controller.core.decide.claims import LEASE_WAIT
from controller.core.decide.decision import Requeue, Run
from controller.core.decide.facts import Facts, Refusal
from controller.core.decide.settings import DEFAULT_SLOT_NAMESPACE, Settings
from controller.core.plan.planner import plan_pass
from controller.io.config import ControllerConfig
from tests import builders as b

CHANGED = {"variables": {"size": 4}}  # inputs that differ from the applied state
SHARD = "sharding.captf.io/key"


def _snap() -> snapshot.Snapshot:
    obj = b.captf(spec=CHANGED)
    obj["metadata"]["labels"] = {SHARD: "shard1", "team": "a"}
    return snapshot.build(obj, b.base_objects())


def _next_job() -> str:
    todo = plan_pass(_snap(), b.NOW)
    assert todo.launch is not None
    return todo.launch.name


def test_the_launch_is_labelled_for_the_shard_and_says_how_long_a_busy_lease_waits() -> None:
    settings = Settings(slot_namespace="captf-system", shard_keys=(SHARD,))
    todo = plan_pass(_snap(), b.NOW, settings=settings)
    assert isinstance(todo.decision, Run)
    assert todo.launch is not None
    assert todo.launch.job["metadata"]["labels"][SHARD] == "shard1"
    assert "team" not in todo.launch.job["metadata"]["labels"]
    assert todo.launch.inputs_secret is not None
    assert todo.launch.inputs_secret["metadata"]["labels"][SHARD] == "shard1"
    assert todo.launch.claims[0].namespace == "captf-system"
    assert todo.launch.if_busy == LEASE_WAIT


def test_a_refusal_plans_its_wait_and_one_warning() -> None:
    job = _next_job()
    refusal = Refusal(job, 1, b.NOW - timedelta(seconds=10), "exceeded quota")
    todo = plan_pass(_snap(), b.NOW, facts=Facts(refusal=refusal))
    assert isinstance(todo.decision, Requeue)
    assert todo.decision.reason == "JobRefused"
    assert todo.decision.after == 50.0  # the first refusal backs off a minute
    assert todo.launch is None
    [event] = todo.events
    assert (event.name, event.reason) == (f"{job}.jobrefused", "JobRefused")
    assert event.message == f"the API server refused Job {job}: exceeded quota"
    assert todo.announces_refusal
    # Once recorded, the streak's later passes stay quiet.
    announced = Refusal(job, 1, refusal.at, refusal.why, announced=True)
    quiet = plan_pass(_snap(), b.NOW, facts=Facts(refusal=announced))
    assert quiet.events == ()
    assert not quiet.announces_refusal


def test_a_refusal_past_its_wait_tries_again() -> None:
    job = _next_job()
    refusal = Refusal(job, 1, b.NOW - timedelta(minutes=2), "exceeded quota", announced=True)
    todo = plan_pass(_snap(), b.NOW, facts=Facts(refusal=refusal))
    assert todo.launch is not None
    assert todo.launch.name == job


def test_captf_run_and_captf_decide_build_the_same_settings() -> None:
    flags = ["--max-concurrent-runs", "3", "--allowed-images", "captf:*,mirror/*"]
    flags += ["--allowed-service-accounts", "runner"]
    run = ControllerConfig.from_args(parser().parse_args(["run", *flags]))
    decide = parser().parse_args(["decide", "-f", "x.yaml", *flags])
    assert run.settings(slot_namespace=DEFAULT_SLOT_NAMESPACE) == settings_for(decide, {}, [])
    assert settings_for(decide, {}, []).runner.images == ("captf:*", "mirror/*")
    # The controller's namespace and the cap, as each is given them (issue 37, item 4).
    flags += ["--controller-namespace", "captf-system", "--max-concurrent-runs-per-cluster", "2"]
    run = ControllerConfig.from_args(parser().parse_args(["run", *flags]))
    decide = parser().parse_args(["decide", "-f", "x.yaml", *flags])
    assert run.settings(slot_namespace="captf-system") == settings_for(decide, {}, [])
    sharded = ControllerConfig(watch_label_selector=f"{SHARD} in (a)").settings("captf-system")
    assert (sharded.shard_keys, sharded.slot_namespace) == ((SHARD,), "captf-system")
