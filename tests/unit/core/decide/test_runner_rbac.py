"""The runner's RBAC, decided from what the caches show: the provided captf-runner is
created when missing and only before a Job; an override account runs only once it opted
in; the provided pieces go only once the namespace holds nothing of CAPTF."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from controller.core.basics.names import LABEL_RUNNER, RUNNER_ACCOUNT
from controller.core.decide import runner_rbac, snapshot
from controller.core.decide.decision import Requeue, Run
from controller.core.decide.facts import Facts
from controller.core.decide.runner_rbac import (
    ACCOUNT_LABELS,
    MANAGED_LABELS,
    NAMESPACE_DEFAULT,
    NOT_OPTED_IN,
    OPTED_IN,
    PROVIDED,
    RunnerFacts,
    verdict,
)
from controller.core.decide.settings import Settings
from controller.core.plan.planner import plan_pass
from controller.core.spec.policy import RunnerPolicy
from tests import builders as b

NS = "team-a"
OPTED = {LABEL_RUNNER: "true"}


def facts(accounts: dict[str, dict[str, str]] | None = None, binding: bool = False) -> RunnerFacts:
    return RunnerFacts(accounts=MappingProxyType(accounts or {}), binding=binding)


# (case, account, facts, ready, reason, kinds created)
VERDICTS = [
    ("fresh namespace: both created", RUNNER_ACCOUNT, facts(), True, PROVIDED, ["SA", "RB"]),
    (
        "account there, binding gone",
        RUNNER_ACCOUNT,
        facts({RUNNER_ACCOUNT: ACCOUNT_LABELS}),
        True,
        PROVIDED,
        ["RB"],
    ),
    (
        "both there: nothing to create",
        RUNNER_ACCOUNT,
        facts({RUNNER_ACCOUNT: ACCOUNT_LABELS}, binding=True),
        True,
        PROVIDED,
        [],
    ),
    ("override opted in", "deployer", facts({"deployer": OPTED}), True, OPTED_IN, []),
    # Unlabelled or missing look alike: neither is in the label-selected cache.
    ("override not opted in", "deployer", facts(), False, NOT_OPTED_IN, []),
    (
        "override labelled false",
        "deployer",
        facts({"deployer": {LABEL_RUNNER: "false"}}),
        False,
        NOT_OPTED_IN,
        [],
    ),
    ("another account's opt-in", "deployer", facts({"other": OPTED}), False, NOT_OPTED_IN, []),
    ("the namespace default", None, facts(), True, NAMESPACE_DEFAULT, []),
]


@pytest.mark.parametrize(
    ("account", "seen", "ready", "reason", "created"),
    [case[1:] for case in VERDICTS],
    ids=[case[0] for case in VERDICTS],
)
def test_verdicts(
    account: str | None, seen: RunnerFacts, ready: bool, reason: str, created: list[str]
) -> None:
    found = verdict(NS, account, seen)
    assert (found.ready, found.reason) == (ready, reason)
    short = {"ServiceAccount": "SA", "RoleBinding": "RB"}
    assert [short[c["kind"]] for c in found.creates] == created
    condition = found.condition()
    assert condition["type"] == "RunnerRBACReady"
    assert condition["status"] == ("True" if ready else "False")


def test_the_binding_grants_the_runner_role_to_the_namespaces_account_only() -> None:
    binding = runner_rbac.role_binding(NS)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": RUNNER_ACCOUNT,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": RUNNER_ACCOUNT, "namespace": NS}
    ]
    assert binding["metadata"]["labels"] == MANAGED_LABELS
    account = runner_rbac.service_account(NS)
    # The provided account carries the opt-in too: one watch of opted-in accounts shows it.
    assert account["metadata"]["labels"] == MANAGED_LABELS | OPTED
    assert runner_rbac.is_managed(account["metadata"]["labels"])


# (case, objects left, Jobs running, facts, removed)
REMOVALS = [
    (
        "last object gone",
        0,
        0,
        facts({RUNNER_ACCOUNT: ACCOUNT_LABELS}, True),
        ("RoleBinding", "ServiceAccount"),
    ),
    ("an object left", 1, 0, facts({RUNNER_ACCOUNT: ACCOUNT_LABELS}, True), ()),
    ("a destroy Job still runs", 0, 1, facts({RUNNER_ACCOUNT: ACCOUNT_LABELS}, True), ()),
    # A hand-made captf-runner (labelled only to opt in) is not the controller's to delete.
    ("account not provided", 0, 0, facts({RUNNER_ACCOUNT: OPTED}, True), ("RoleBinding",)),
    ("nothing provided", 0, 0, facts({"deployer": OPTED}), ()),
]


@pytest.mark.parametrize(
    ("objects", "running", "seen", "removed"),
    [case[1:] for case in REMOVALS],
    ids=[case[0] for case in REMOVALS],
)
def test_removals(objects: int, running: int, seen: RunnerFacts, removed: tuple[str, ...]) -> None:
    assert runner_rbac.removals(objects, running, seen) == removed


SETTINGS = Settings(runner=RunnerPolicy(service_accounts=(RUNNER_ACCOUNT, "deployer")))


def _snap(account: str | None = None) -> snapshot.Snapshot:
    jobs = {"image": "captf:dev"} | ({"serviceAccountName": account} if account else {})
    obj = b.captf(spec={"variables": {"size": 4}, "jobs": jobs})
    return snapshot.build(obj, b.base_objects())


def _condition(status: dict[str, object] | None) -> dict[str, object]:
    assert status is not None
    conditions = status["conditions"]
    assert isinstance(conditions, list)
    [found] = [c for c in conditions if c["type"] == "RunnerRBACReady"]
    return dict(found)


def test_a_first_run_creates_the_runner_rbac_before_its_job() -> None:
    todo = plan_pass(_snap(), b.NOW, settings=SETTINGS, facts=Facts(runner=facts()))
    assert isinstance(todo.decision, Run)
    assert todo.launch is not None
    assert todo.launch.job["spec"]["template"]["spec"]["serviceAccountName"] == RUNNER_ACCOUNT
    assert [c["kind"] for c in todo.runner_rbac] == ["ServiceAccount", "RoleBinding"]
    assert _condition(todo.status)["status"] == "True"


def test_an_override_without_the_opt_in_starts_no_job() -> None:
    todo = plan_pass(_snap("deployer"), b.NOW, settings=SETTINGS, facts=Facts(runner=facts()))
    assert isinstance(todo.decision, Requeue)
    assert todo.decision.reason == "RunnerRBACNotReady"
    assert todo.launch is None
    assert todo.runner_rbac == ()
    condition = _condition(todo.status)
    assert (condition["status"], condition["reason"]) == ("False", NOT_OPTED_IN)
    assert "captf.io/runner=true" in str(condition["message"])


def test_an_override_that_opted_in_runs_and_creates_nothing() -> None:
    seen = facts({"deployer": OPTED})
    todo = plan_pass(_snap("deployer"), b.NOW, settings=SETTINGS, facts=Facts(runner=seen))
    assert isinstance(todo.decision, Run)
    assert todo.launch is not None
    assert todo.runner_rbac == ()
    assert _condition(todo.status)["reason"] == OPTED_IN


def test_no_job_no_creates() -> None:
    """The provided RBAC comes with a namespace's first Job, not with an idle object."""
    obj = b.captf()
    snap = snapshot.build(obj, b.base_objects())
    todo = plan_pass(snap, b.NOW, settings=SETTINGS, facts=Facts(runner=facts()))
    assert not isinstance(todo.decision, Run)
    assert todo.runner_rbac == ()


def test_without_facts_the_stored_condition_stays() -> None:
    """`captf decide` reads nothing of the namespace's RBAC: it holds nothing back and keeps
    the condition the controller wrote."""
    snap = _snap("deployer")
    stored = {"type": "RunnerRBACReady", "status": "False", "reason": NOT_OPTED_IN}
    obj = snap.obj | {"status": {"conditions": [stored | {"message": "m"}]}}
    todo = plan_pass(snapshot.build(obj, b.base_objects()), b.NOW, settings=SETTINGS)
    assert isinstance(todo.decision, Run)
    assert _condition(todo.status)["reason"] == NOT_OPTED_IN
