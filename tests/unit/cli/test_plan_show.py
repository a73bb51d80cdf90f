"""`captf plan show`'s lines for a TerraformPlan: phase, approval, counts, addresses."""

from __future__ import annotations

from controller.cli.people.plan_show import describe
from tests.builders import approval


def test_a_plan_is_described_by_its_status_and_approver() -> None:
    plan = approval("c1-apply-00000001", approved=True, phase="Approved")
    plan["spec"]["approvedBy"] = "alice@example.com"
    plan["status"]["counts"] = {"create": 1, "update": 0, "replace": 1, "delete": 0}
    plan["status"]["resources"] = [
        {"address": "a.one", "action": "create"},
        {"address": "b.two", "action": "replace"},
    ]
    assert describe(plan) == [
        "TerraformPlan c1-apply-00000001 of TerraformCluster/c1",
        "Phase:        Approved",
        "Approved:     yes",
        "Approved by:  alice@example.com",
        f"Inputs hash:  {plan['status']['inputsHash']}",
        "Fingerprint:  sha256:f",
        "Changes:      1 to create, 0 to update, 1 to replace, 0 to delete",
        "  create   a.one",
        "  replace  b.two",
    ]


def test_more_changes_than_listed_say_so() -> None:
    plan = approval("c1-plan-00000002", approved=False)
    plan["status"]["counts"] = {"create": 73}
    plan["status"]["resources"] = [{"address": f"r.n{i}", "action": "create"} for i in range(50)]
    lines = describe(plan)
    assert lines[2:4] == ["Approved:     no", "Approved by:  -"]
    assert lines[-1] == "  (50 of 73 listed)"
    assert len(lines) == 7 + 50 + 1


def test_the_plan_and_the_newest_run_show_their_changes_per_action() -> None:
    from controller.cli.people.plan_show import newest_run

    plan = approval("c1-apply-00000001")
    plan["status"]["changes"] = {
        "create": 3,
        "update": 0,
        "replace": 1,
        "delete": 0,
        "addresses": {"create": ["a", "b"], "replace": ["g"]},
    }
    lines = describe(plan)
    assert "  create 3: a, b (and 1 more)" in lines
    assert "  replace 1: g" in lines
    obj = {
        "status": {
            "lastRun": {
                "job": "c1-drift-1",
                "op": "drift",
                "result": "succeeded",
                "changes": plan["status"]["changes"],
            },
            "conditions": [
                {"type": "PolicyCompliant", "reason": "Compliant", "message": "no rule matched"}
            ],
        }
    }
    shown = newest_run("TerraformCluster/c1", obj)
    assert shown[0] == "TerraformCluster/c1: newest run c1-drift-1 (drift succeeded)"
    assert "Changes:      3 to create, 1 to replace" in shown
    assert shown[-1] == "Policies:     Compliant: no rule matched"
