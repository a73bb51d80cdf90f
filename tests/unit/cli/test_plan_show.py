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
