"""A fixed table of generated snapshots and Facts, and what each decides: the reasons
users see, in the order the steps and guards give them, are part of the API.

`rows()` draws the same cases on every run (a seeded generator, not hypothesis: the
table is data that must not move) over what stands between a due op and its Job:
histories, run slots and the per-cluster cap, the family's Leases, a member's
cluster running, suspend, a change window, a refused Job, the runner's RBAC, a
module image and its lookup. Each row is the verbose decision with what the plan
launches (the Leases it claims, the slots it would try next, the RBAC it creates).

`python -m tests.unit.core.decide.reasons_cases > tests/unit/core/decide/reasons_table.jsonl`
writes the table; regenerate it only for a change of behaviour that is meant, and say
so in the commit."""

from __future__ import annotations

import io
import random
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import orjson

from controller.cli.main import main
from controller.core.basics.names import (
    ANN_DRIFT_REMEDIATION,
    ANN_HOLDER_CLUSTER,
    ANN_HOLDER_NAMESPACE,
    LABEL_RUNNER,
    LABEL_SCOPE,
    MACHINE,
    SCOPE_RUN_SLOT,
    Op,
)
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.facts import Facts, Refusal
from controller.core.decide.runner_rbac import RunnerFacts
from controller.core.decide.settings import Settings
from controller.core.leases import family
from controller.core.plan.planner import plan_pass
from controller.core.spec.image import REGISTRY_UNAVAILABLE, Resolved, Unresolved
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    NS,
    ago,
    base_objects,
    capi_cluster,
    captf,
    job,
    lease,
    module_configmap,
    owners_of,
    secret,
)
from tests.paths import REPO

SEED = 38
COUNT = 600
IMAGE = "registry.example/m:1"
DIGEST = "sha256:" + "ab" * 32
OPS = [Op.APPLY, Op.DRIFT, Op.REFRESH, Op.PLAN]
OUTCOMES = ["succeeded", "failed", "interrupted", "blocked", "plan-changed", None]
# A window open now (12:00 UTC) and one that opened at 01:00 for an hour.
WINDOWS = [None, [{"start": "11:00", "duration": "2h"}], [{"start": "01:00", "duration": "1h"}]]


@dataclass(frozen=True)
class Case:
    name: str
    objects: list[Json]
    settings: Settings
    facts: Facts


def _jobs(r: random.Random, owner: str, kind: str) -> list[Json]:
    out = []
    for seq in range(1, r.randint(0, 4) + 1):
        op = r.choice(OPS)
        outcome = r.choice(OUTCOMES)
        state = r.choice(["Complete", "Failed"])
        reason = r.choice(["BackoffLimitExceeded", "DeadlineExceeded"])
        notes = {ANN_DRIFT_REMEDIATION: "true"} if op == Op.APPLY and r.random() < 0.2 else {}
        result: Json = {"drift": r.random() < 0.5} if op == Op.DRIFT else {}
        if op == Op.PLAN:
            result["planSecret"] = f"{owner}-plan"
        finished = ago(seconds=r.randint(0, 7200))
        out.append(
            job(
                op,
                seq,
                outcome,
                state=state,
                reason=reason,
                finished=finished,
                owner=owner,
                kind=kind,
                annotations=notes,
                result=result,
            )
        )
    return out


def _spec(r: random.Random) -> Json:
    spec: Json = {
        "variables": {"size": r.choice([3, 4])},
        "jobs": {"image": "captf:dev", "failedJobsHistoryLimit": r.randint(0, 4)},
        "drift": {"interval": r.choice(["0", "10m", "1h"]), "remediate": r.random() < 0.5},
        "refresh": {"interval": r.choice(["", "30m"])},
        "approval": {"mode": r.choice(["Auto", "Auto", "Manual"])},
    }
    if r.random() < 0.15:
        spec["suspend"] = True
    windows = r.choice(WINDOWS)
    if windows is not None:
        spec["changeWindows"] = windows
    account = r.choice([None, None, "captf-runner", "mine"])
    if account is not None:
        spec["jobs"]["serviceAccountName"] = account
    if r.random() < 0.25:
        spec["source"] = {"image": IMAGE}
    return spec


def _slot(i: int, holder: str | None, home: str, cluster: str) -> Json:
    held = lease(f"captf-run-slot-{i}", holder, {LABEL_SCOPE: SCOPE_RUN_SLOT})
    held["metadata"]["namespace"] = home
    held["metadata"]["annotations"] = {ANN_HOLDER_NAMESPACE: NS, ANN_HOLDER_CLUSTER: cluster}
    return held


def _family(r: random.Random) -> list[Json]:
    """The cluster family's operation Lease: free, held by the cluster's Job, or a member's."""
    choice = r.choice([None, None, None, None, "c1-apply-00000063", "m9-apply-00000001"])
    if choice is None:
        return []
    return [lease(family.lease_name("c1"), choice)]


def _facts(r: random.Random, nexts: list[str]) -> Facts:
    """Facts of a live pass; a refusal names one of the Jobs the object would create next."""
    refusal = None
    if r.random() < 0.25:
        name = r.choice(nexts)
        refusal = Refusal(name, r.randint(1, 4), ago(minutes=r.randint(0, 30)), "quota")
    runner = None
    if r.random() < 0.4:
        labelled = r.random() < 0.5
        accounts = {"mine": {LABEL_RUNNER: "true"}} if labelled else {}
        runner = RunnerFacts(MappingProxyType(accounts), r.random() < 0.5)
    image = r.choice(
        [
            None,
            Resolved(IMAGE, DIGEST, 1, None),
            Resolved(IMAGE, DIGEST, 1, None, asked=False),
            Unresolved(IMAGE, REGISTRY_UNAVAILABLE, "registry down"),
        ]
    )
    pending = frozenset({nexts[0]}) if r.random() < 0.03 else frozenset()
    return Facts(refusal=refusal, runner=runner, image=image, pending_jobs=pending)


def _cluster_case(r: random.Random) -> tuple[list[Json], str]:
    obj = captf(spec=_spec(r))
    if r.random() < 0.1:
        obj["status"] = {"activeJob": r.choice(["c1-apply-00000009", "c1-drift-00000001"])}
    members = []
    if r.random() < 0.2:
        member = captf(MACHINE, "m9", status={"activeJob": "m9-apply-00000001"})
        members.append(member)
    running = [job("apply", 7, None, state="Running")] if r.random() < 0.08 else []
    objects = [obj, *base_objects(applied=r.random() < 0.8), *_jobs(r, "c1", "TerraformCluster")]
    return [*objects, *members, *running], "c1"


def _machine_case(r: random.Random) -> tuple[list[Json], str]:
    machine = captf(MACHINE, "m1", spec=_spec(r))
    status: Json = {"activeJob": "c1-apply-00000002"} if r.random() < 0.1 else {}
    cluster = captf(ready=True, status=status)
    if status:
        cluster["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    others = [
        module_configmap("m1"),
        secret("creds", {"t": "x"}),
        cluster,
        *owners_of(machine, cluster=capi_cluster("c1")),
        *_jobs(r, "m1", MACHINE),
    ]
    return [machine, *others], "m1"


def cases(count: int = COUNT, seed: int = SEED) -> Iterator[Case]:
    r = random.Random(seed)
    for i in range(count):
        objects, owner = (_machine_case if r.random() < 0.3 else _cluster_case)(r)
        home = r.choice([NS, "captf-system"])
        runs = r.randint(1, 3)
        taken = [None, None, None, "other-apply-1", f"{owner}-apply-00000001"]
        holders = [r.choice(taken) for _ in range(3)]
        slots = [_slot(n, h, home, r.choice(["c1", "c2"])) for n, h in enumerate(holders[:runs])]
        objects += slots + _family(r)
        chosen = Settings(
            max_concurrent_runs=runs, max_runs_per_cluster=r.randint(0, 2), slot_namespace=home
        )
        snap = snapshot.build(objects[0], objects[1:])
        nexts = [snap.next_job(op)[0] for op in (Op.APPLY, Op.DRIFT, Op.PLAN)]
        yield Case(f"generated-{i:03d}", objects, chosen, _facts(r, nexts))


def row(case: Case) -> dict[str, Any]:
    """What a case decides and what its plan launches, as the table holds it."""
    snap = snapshot.build(case.objects[0], case.objects[1:])
    todo = plan_pass(snap, NOW + timedelta(0), settings=case.settings, facts=case.facts)
    out: dict[str, Any] = {"case": case.name, "decision": to_json(todo.decision, verbose=True)}
    if todo.launch is not None:
        out["claims"] = [[c.namespace, c.name, str(c.role)] for c in todo.launch.claims]
        out["otherSlots"] = list(todo.launch.other_slots)
        out["ifBusy"] = todo.launch.if_busy
    if todo.runner_rbac:
        out["creates"] = [body["kind"] for body in todo.runner_rbac]
    return out


def example_rows() -> list[dict[str, Any]]:
    """Each example snapshot's line of `captf decide -v -f`, byte for byte."""
    out = []
    for path in sorted((REPO / "examples" / "snapshots").glob("*.yaml")):
        printed = io.StringIO()
        with redirect_stdout(printed):
            assert main(["decide", "-v", "-f", str(path)]) == 0
        out.append({"case": f"examples/snapshots/{path.name}", "printed": printed.getvalue()})
    return out


def rows() -> list[dict[str, Any]]:
    return [*example_rows(), *(row(case) for case in cases())]


def write() -> None:
    for line in rows():
        sys.stdout.buffer.write(orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n")


if __name__ == "__main__":
    write()
