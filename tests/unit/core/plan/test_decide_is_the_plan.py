"""`captf decide` prints the decision the controller carries out, by construction.

Over generated snapshots (histories, run slots, a running or vanished Job, a module
image) and Facts (a refused Job, the runner's RBAC, a registry answer, Jobs being
created), three paths agree:

- the controller's: `plan_pass(...)`, whose writes carry its decision out and nothing else
  (a Run launches, and only a Run; an ImageResolving wait makes the lookup, and only
  it): no wait is made after the decision;
- `captf decide -f`: the snapshot written as a file, read back and decided with no
  Facts, prints the plan's decision without Facts;
- `captf decide --live`: the Facts a live read has (the runner RBAC, a vanished active
  Job) give the plan's decision with those Facts."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from tempfile import TemporaryDirectory
from types import MappingProxyType
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cli.decide_command import decided
from controller.cli.decide_settings import settings_for
from controller.cli.main import parser
from controller.cli.snapshot_file import load
from controller.core.basics.names import (
    ANN_HOLDER_CLUSTER,
    ANN_HOLDER_NAMESPACE,
    LABEL_RUNNER,
    LABEL_SCOPE,
    SCOPE_RUN_SLOT,
    Reason,
)
from controller.core.basics.timefmt import format_time
from controller.core.decide import snapshot
from controller.core.decide.decision import Requeue, Run, to_json
from controller.core.decide.facts import NO_FACTS, Facts, Refusal
from controller.core.decide.runner_rbac import RunnerFacts
from controller.core.decide.settings import Settings
from controller.core.plan.decided import decision_of
from controller.core.plan.planner import live_check_needed, plan_pass
from controller.core.spec.image import REGISTRY_UNAVAILABLE, Resolved, Unresolved
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    NS,
    ago,
    base_objects,
    captf,
    job,
    lease,
)
from tests.unit.core.decide.test_decide_properties import JOB, SPEC, _jobs

IMAGE = "registry.example/m:1"
DIGEST = "sha256:" + "ab" * 32

SLOTS = st.lists(st.sampled_from(["c1-apply-00000001", "other-apply-1", None]), max_size=3)
# The controller's namespace, where its run slots are, and its per-cluster cap: decide
# finds the one in the slots and takes the other from its flag (issue 37, item 4).
HOME = st.sampled_from(["default", "captf-system"])
CAP = st.integers(0, 2)
ACTIVE = st.sampled_from([None, "c1-apply-00000009", "c1-drift-00000001"])
RUNNING = st.booleans()
ACCOUNT = st.sampled_from([None, "captf-runner", "mine"])
RUNNER = st.one_of(
    st.none(),
    st.builds(
        lambda labelled, binding: RunnerFacts(
            MappingProxyType({"mine": {LABEL_RUNNER: "true"}} if labelled else {}), binding
        ),
        st.booleans(),
        st.booleans(),
    ),
)
REFUSAL = st.one_of(
    st.none(),
    st.builds(
        lambda job_name, count, minutes: Refusal(job_name, count, ago(minutes=minutes), "no"),
        st.sampled_from(["c1-apply-00000001", "c1-apply-00000002", "c1-drift-00000001"]),
        st.integers(1, 4),
        st.integers(0, 30),
    ),
)
ANSWER = st.sampled_from(
    [
        None,
        Resolved(IMAGE, DIGEST, 1, None),
        Resolved(IMAGE, DIGEST, 1, None, asked=False),
        Unresolved(IMAGE, REGISTRY_UNAVAILABLE, "registry down"),
    ]
)


def _objects(
    spec: Json,
    specs: list[Any],
    slots: list[str | None],
    active: str | None,
    running: bool,
    account: str | None,
    image: bool,
    home: str = NS,
) -> list[Json]:
    spec = dict(spec)
    if account is not None:
        spec["jobs"] = spec["jobs"] | {"serviceAccountName": account}
    obj = captf(spec=spec)
    if image:
        obj["spec"]["source"] = {"image": IMAGE}
    if active is not None:
        obj["status"] = {"activeJob": active}
    held = [
        _in(home, lease(f"captf-run-slot-{i}", holder, {LABEL_SCOPE: SCOPE_RUN_SLOT}))
        for i, holder in enumerate(slots)
    ]
    busy = [job("apply", 7, None, state="Running")] if running else []
    return [obj, *base_objects(), *_jobs(specs), *held, *busy]


def _in(home: str, slot: Json) -> Json:
    """A run slot of the controller's namespace `home`, held for a Job of cluster c1."""
    slot["metadata"]["namespace"] = home
    slot["metadata"]["annotations"] = {ANN_HOLDER_NAMESPACE: NS, ANN_HOLDER_CLUSTER: "c1"}
    return slot


def _file(objects: list[Json]) -> tuple[Any, list[Json]]:
    """The snapshot as a `captf decide -f` file, read back as the CLI reads it."""
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_bytes(orjson.dumps({"now": format_time(NOW), "objects": objects}))
        return load(str(path))


@settings(max_examples=150, deadline=None)
@given(
    SPEC,
    st.lists(JOB, max_size=5),
    SLOTS,
    ACTIVE,
    RUNNING,
    ACCOUNT,
    st.booleans(),
    st.fixed_dictionaries(
        {
            "refusal": REFUSAL,
            "runner": RUNNER,
            "image": ANSWER,
            "pending_jobs": st.sampled_from([frozenset(), frozenset({"c1-apply-00000003"})]),
            "active_gone": st.booleans(),
        }
    ),
    st.integers(1, 3),
    HOME,
    CAP,
)
def test_captf_decide_prints_the_decision_the_plan_carries_out(
    spec: Json,
    specs: list[Any],
    slots: list[str | None],
    active: str | None,
    running: bool,
    account: str | None,
    image: bool,
    fields: dict[str, Any],
    runs: int,
    home: str,
    cap: int,
) -> None:
    objects = _objects(spec, specs, slots, active, running, account, image, home)
    chosen = Settings(max_concurrent_runs=runs, max_runs_per_cluster=cap, slot_namespace=home)
    snap = snapshot.build(objects[0], objects[1:])
    facts = Facts(**fields)

    # The controller: the plan carries its decision out, and makes no wait of its own.
    todo = plan_pass(snap, NOW, settings=chosen, facts=facts)
    assert isinstance(todo.decision, Run) == (todo.launch is not None)
    resolving = isinstance(todo.decision, Requeue) and (
        todo.decision.reason == Reason.IMAGE_RESOLVING
    )
    assert resolving == (todo.image_lookup is not None)
    assert decision_of(snap, NOW, settings=chosen, facts=facts) == todo.decision

    # `captf decide -f`: no Facts; the slot flags given, the namespace found in the slots
    # (the runner policy, which the CLI's defaults restrict, as chosen).
    now, read = _file(objects)
    flags = ["--max-concurrent-runs", str(runs), "--max-concurrent-runs-per-cluster", str(cap)]
    found = settings_for(parser().parse_args(["decide", "-f", "-", *flags]), {}, read)
    slot_flags = (found.max_concurrent_runs, found.max_runs_per_cluster, found.slot_namespace)
    assert slot_flags == (runs, cap, home if slots else "default")
    offline = decided(now, read, replace(chosen, slot_namespace=found.slot_namespace))
    assert to_json(offline, verbose=True) == to_json(
        plan_pass(snap, NOW, settings=chosen, facts=NO_FACTS).decision, verbose=True
    )

    # `captf decide --live`: the Facts a live read has.
    live = decided(now, read, chosen, live=True, runner=fields["runner"])
    read_facts = Facts(
        runner=fields["runner"], active_gone=live_check_needed(snap, frozenset()) is not None
    )
    assert to_json(live, verbose=True) == to_json(
        plan_pass(snap, NOW, settings=chosen, facts=read_facts).decision, verbose=True
    )


def test_a_refused_job_waits_in_the_decision_itself() -> None:
    """The refusal's wait is DecideOp's (holds.refused), not a change made after it."""
    objects = _objects({"variables": {"size": 4}, "jobs": {}}, [], [], None, False, None, False)
    snap = snapshot.build(objects[0], objects[1:])
    first = plan_pass(snap, NOW).decision
    assert isinstance(first, Run)
    name = snap.next_job(first.op)[0]
    facts = Facts(refusal=Refusal(name, 1, NOW - timedelta(seconds=1), "quota"))
    waited = decision_of(snap, NOW, facts=facts)
    assert isinstance(waited, Requeue)
    assert waited.reason == Reason.JOB_REFUSED
    assert plan_pass(snap, NOW, facts=facts).launch is None
