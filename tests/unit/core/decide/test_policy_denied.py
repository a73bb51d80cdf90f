"""PolicyDenied in DecideOp: a denied apply (or Manual plan) holds the object, with no
backoff and no retry, until its inputs or its policy set change; what the status shows
of the judgement (PolicyCompliant, lastRun.changes) and the Events."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.basics.names import ANN_INPUTS_HASH, ANN_POLICY_HASH, Reason
from controller.core.decide import snapshot
from controller.core.decide.context import Context, context_of
from controller.core.decide.steps import decide
from controller.core.plan import status as status_mod
from controller.core.plan.accounting import accounting_of
from controller.core.spec.plan_policies import policy_set
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    ago,
    base_objects,
    captf,
    current_hash,
    decided,
    job,
    secret,
)

RULE = {
    "name": "group",
    "expression": "resource.address == 'terraform_data.group'",
    "action": "Deny",
    "message": "never replace the group",
}


def policy(name: str = "no-replace", rule: Json | None = None, **spec: Any) -> Json:
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformPolicy",
        "metadata": {"name": name},
        "spec": {"rules": [rule or RULE], **spec},
    }


def namespace(labels: dict[str, str]) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "default", "labels": labels},
    }


def policy_hash(obj: Json, others: list[Json]) -> str:
    snap = snapshot.build(obj, others)
    found = policy_set(snap.policies, snap.obj, snap.related, snap.namespace_labels)
    assert found is not None
    return found.hash


REPORT: Json = {
    "verdict": "denied",
    "violations": [
        {
            "policy": "no-replace",
            "rule": "group",
            "action": "Deny",
            "why": "matched",
            "message": "never replace the group",
            "addresses": ["terraform_data.group"],
            "count": 1,
        }
    ],
    "total": 1,
}


def denied_apply(seq: int, given: str, *, inputs: str | None = None, minutes: float = 2) -> Json:
    notes = {ANN_POLICY_HASH: given, ANN_INPUTS_HASH: inputs or current_hash(variables={"size": 4})}
    result = {
        "message": "denied",
        "policy": REPORT,
        "changes": {"create": 0, "update": 0, "replace": 1, "delete": 0},
    }
    return job(
        "apply", seq, "policy-denied", result=result, annotations=notes, finished=ago(minutes)
    )


def changed_object() -> Json:
    # New inputs (size 4) that the state (applied with size 3) does not have.
    return captf(spec={"variables": {"size": 4}})


def test_a_denied_apply_waits_for_a_change_without_backoff() -> None:
    obj, others = changed_object(), [*base_objects(), policy()]
    others.append(denied_apply(1, policy_hash(obj, others)))
    found = decided(obj, others)
    assert found["reason"] == Reason.POLICY_DENIED
    assert found["after"] == 600.0
    message = decide(snapshot.build(obj, others), NOW).message
    assert "policy no-replace rule group (Deny): never replace the group" in message
    assert "[terraform_data.group]" in message


def test_an_edit_of_the_policy_lets_the_next_apply_run() -> None:
    obj, others = changed_object(), [*base_objects(), policy()]
    others.append(denied_apply(1, policy_hash(obj, others)))
    edited = [o for o in others if o.get("kind") != "TerraformPolicy"]
    edited.append(policy(rule=RULE | {"expression": "resource.address == 'terraform_data.other'"}))
    found = decided(obj, edited)
    assert (found["action"], found["op"], found["reason"]) == ("run", "apply", "InputsChanged")


@pytest.mark.parametrize("change", ["deleted", "unselected"])
def test_a_policy_gone_or_no_longer_selecting_ends_the_wait(change: str) -> None:
    obj, others = changed_object(), [*base_objects(), policy(), namespace({"team": "a"})]
    others.append(denied_apply(1, policy_hash(obj, others)))
    rest = [o for o in others if o.get("kind") != "TerraformPolicy"]
    if change == "unselected":
        rest.append(policy(namespaceSelector={"matchLabels": {"team": "b"}}))
    assert decided(obj, rest)["reason"] == "InputsChanged"


def test_new_inputs_end_the_wait() -> None:
    obj, others = changed_object(), [*base_objects(), policy()]
    others.append(denied_apply(1, policy_hash(obj, others), inputs="sha256:older"))
    assert decided(obj, others)["reason"] == "InputsChanged"


def test_a_denied_apply_counts_no_failure() -> None:
    obj, others = changed_object(), [*base_objects(), policy()]
    given = policy_hash(obj, others)
    others += [denied_apply(1, given, minutes=3), denied_apply(2, given, minutes=2)]
    snap = snapshot.build(obj, others)
    assert snap.history.failures("apply") == []


def test_the_labels_pick_the_policies() -> None:
    obj = changed_object()
    obj["metadata"]["labels"] = {"tier": "prod", "captf.io/retry-capped": "apply"}
    others = [*base_objects(), policy(objectSelector={"matchLabels": {"tier": "prod"}})]
    snap = snapshot.build(obj, others)
    chosen = policy_set(snap.policies, snap.obj, snap.related, snap.namespace_labels)
    assert chosen is not None
    # The controller's own labels are not shown to rules, nor part of the policy version.
    assert chosen.subject["object"]["labels"] == {"tier": "prod"}
    obj["metadata"]["labels"] = {"tier": "dev"}
    snap = snapshot.build(obj, others)
    assert policy_set(snap.policies, snap.obj, snap.related, snap.namespace_labels) is None


def test_cluster_api_labelling_the_object_after_a_denial_keeps_the_wait() -> None:
    """Cluster API puts its cluster-name label on a TerraformCluster some time after it is
    created; a denial made before the label came still holds after (the whole suite saw a
    third apply there, judged and denied again), and the label still selects."""
    obj, others = changed_object(), [*base_objects(), policy()]
    others.append(denied_apply(1, policy_hash(obj, others)))
    obj["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "c1"}
    assert decided(obj, others)["reason"] == Reason.POLICY_DENIED
    selecting = [*base_objects(), policy(objectSelector={"matchLabels": obj["metadata"]["labels"]})]
    assert policy_hash(obj, selecting)


def test_the_status_names_policy_rule_and_addresses() -> None:
    obj, others = changed_object(), [*base_objects(), policy()]
    others.append(denied_apply(1, policy_hash(obj, others)))
    snap = snapshot.build(obj, others)
    ctx = context_of(snap, NOW)
    assert isinstance(ctx, Context)
    shown = status_mod.desired(snap, decide(snap, NOW), ctx, NOW)
    [cond] = [c for c in shown["conditions"] if c["type"] == "PolicyCompliant"]
    assert (cond["status"], cond["reason"]) == ("False", "PolicyDenied")
    assert "no-replace" in cond["message"]
    assert "group" in cond["message"]
    assert "terraform_data.group" in cond["message"]
    assert shown["lastRun"]["result"] == "policy-denied"
    assert shown["lastRun"]["changes"] == {"create": 0, "update": 0, "replace": 1, "delete": 0}


def test_a_warned_apply_gets_a_warning_event_beside_applied() -> None:
    report = {
        "verdict": "warned",
        "violations": [REPORT["violations"][0] | {"action": "Warn"}],
        "total": 1,
    }
    applied = job("apply", 1, "succeeded", result={"message": "applied", "policy": report})
    obj = captf()
    snap = snapshot.build(obj, [*base_objects(), applied])
    [record] = list(snap.history)
    accounted = accounting_of(snap, snap.history, record)
    assert accounted.event is not None
    assert accounted.event.reason == "Applied"
    assert accounted.warning is not None
    assert (accounted.warning.type, accounted.warning.reason) == ("Warning", "PolicyWarning")
    assert "never replace the group" in accounted.warning.message


def test_a_policy_hold_is_told_from_the_guard() -> None:
    report = {
        "verdict": "approval-required",
        "violations": [REPORT["violations"][0] | {"action": "RequireApproval"}],
        "total": 1,
    }
    held = job("apply", 1, "blocked", result={"message": "held", "policy": report})
    snap = snapshot.build(captf(), [*base_objects(), held])
    [record] = list(snap.history)
    assert record.verdict.event == "PolicyApprovalRequired"
    blocked = job("apply", 2, "blocked", result={"message": "deletes x"})
    snap = snapshot.build(captf(), [*base_objects(), blocked])
    assert next(iter(snap.history)).verdict.event == "DestructivePlanBlocked"


def test_the_secret_values_a_job_carried_leave_no_trace() -> None:
    token = "s3cr3t-t0ken-value"
    leaky = REPORT["violations"][0] | {
        "addresses": [f'terraform_data.g["{token}"]'],
        "message": f"m {token}",
    }
    report = REPORT | {"violations": [leaky]}
    changes = {
        "create": 1,
        "update": 0,
        "replace": 0,
        "delete": 0,
        "addresses": {"create": [f'x["{token}"]']},
    }
    obj, others = changed_object(), [*base_objects(), policy()]
    others = [
        o for o in others if not (o.get("kind") == "Secret" and o["metadata"]["name"] == "creds")
    ]
    others.append(secret("creds", {"token": token}))
    denied = denied_apply(1, policy_hash(obj, others))
    result_body = {
        "outcome": "policy-denied",
        "message": f"denied {token}",
        "policy": report,
        "changes": changes,
    }
    import orjson

    denied["metadata"]["annotations"]["captf.io/result"] = orjson.dumps(result_body).decode()
    runner = {"name": "runner", "envFrom": [{"secretRef": {"name": "creds"}}]}
    denied["spec"] = {"template": {"spec": {"containers": [runner]}}}
    others.append(denied)
    snap = snapshot.build(obj, others)
    decision = decide(snap, NOW)
    ctx = context_of(snap, NOW)
    assert isinstance(ctx, Context)
    shown = status_mod.desired(snap, decision, ctx, NOW)
    [record] = list(snap.history)
    accounted = accounting_of(snap, snap.history, record)
    texts = [
        decision.message,
        orjson.dumps(shown).decode(),
        accounted.event.message if accounted.event else "",
    ]
    assert token not in "".join(texts)
    assert "(redacted)" in orjson.dumps(shown).decode()


def test_a_denied_manual_plan_is_not_planned_again() -> None:
    obj = captf(spec={"variables": {"size": 4}, "approval": {"mode": "Manual"}})
    others = [*base_objects(), policy()]
    notes = {
        ANN_POLICY_HASH: policy_hash(obj, others),
        ANN_INPUTS_HASH: current_hash(variables={"size": 4}),
    }
    result = {"message": "denied", "policy": REPORT}
    others.append(job("plan", 1, "policy-denied", result=result, annotations=notes))
    found = decided(obj, others)
    assert (found["reason"], found["op"]) == (Reason.POLICY_DENIED, "plan")


def test_policies_too_large_for_a_job_hold_the_apply() -> None:
    huge = RULE | {"expression": "resource.type == '" + "x" * 1_900 + "'"}
    many = [policy(f"p{i}", huge | {"name": f"r{i}"}) for i in range(40)]
    found = decided(changed_object(), [*base_objects(), *many])
    assert found["reason"] == Reason.POLICY_DENIED
    message = decide(snapshot.build(changed_object(), [*base_objects(), *many]), NOW).message
    assert "more than a Job carries" in message
    # A refresh or a drift check needs no policies: an object with nothing to apply idles.
    assert decided(captf(), [*base_objects(), *many])["action"] == "idle"
