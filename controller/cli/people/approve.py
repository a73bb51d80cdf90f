"""`captf approve KIND/NAME`: sets spec.approved on exactly the TerraformPlan that waits.

It needs update (patch) on terraformplans: the captf-plan-approver role, which the
edit role does not include (docs/security.md, "Approvals")."""

from __future__ import annotations

import argparse

from controller.cli.people.common import run_command, source_of
from controller.cli.people.plans import approve, changes_text, read_plans, waiting_plan


def _approve(args: argparse.Namespace) -> int:
    found = read_plans(args.ref, source=source_of(args))
    plan = waiting_plan(found)
    approve(source_of(args), plan)
    name = plan["metadata"]["name"]
    print(f"{found.who}: approved TerraformPlan {name} ({changes_text(plan)})")
    return 0


run = run_command("approve", _approve)
