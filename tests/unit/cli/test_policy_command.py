"""`captf policy test`: every example policy lets its passing plan through and stops its
failing one, as the runner would; a bad policy is refused as at admission."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.cli.main import main
from tests.paths import REPO

EXAMPLES = REPO / "examples" / "policies"
OBJECT = str(EXAMPLES / "prod-object.yaml")


@pytest.mark.parametrize(
    ("policy", "failing_exit"),
    [("no-replacement", 1), ("count-limit", 3), ("allowed-regions", 1)],
)
def test_each_example_passes_one_plan_and_stops_the_other(policy: str, failing_exit: int) -> None:
    args = ["policy", "test", str(EXAMPLES / f"{policy}.yaml")]
    assert main([*args, str(EXAMPLES / f"{policy}.pass.json"), "--object", OBJECT]) == 0
    assert main([*args, str(EXAMPLES / f"{policy}.fail.json"), "--object", OBJECT]) == failing_exit


def test_a_policy_that_does_not_select_the_object_judges_nothing(tmp_path: Path) -> None:
    dev = tmp_path / "dev.yaml"
    dev.write_text(Path(OBJECT).read_text().replace("tier: prod", "tier: dev"))
    args = ["policy", "test", str(EXAMPLES / "allowed-regions.yaml")]
    assert main([*args, str(EXAMPLES / "allowed-regions.fail.json"), "--object", str(dev)]) == 0


def test_json_names_rule_addresses_and_cost(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["policy", "test", str(EXAMPLES / "no-replacement.yaml")]
    assert main([*args, str(EXAMPLES / "no-replacement.fail.json"), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["verdict"] == "denied"
    assert found["cost"] <= found["costLimit"]
    [violation] = found["violations"]
    assert (violation["rule"], violation["addresses"]) == (
        "no-db-replace",
        ["aws_db_instance.orders"],
    )


def test_approved_lets_a_require_approval_plan_through() -> None:
    args = ["policy", "test", str(EXAMPLES / "count-limit.yaml")]
    assert main([*args, str(EXAMPLES / "count-limit.fail.json"), "--approved"]) == 0


def test_a_rule_admission_would_refuse_is_printed_with_its_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (EXAMPLES / "no-replacement.yaml")
        .read_text()
        .replace("resource.type ==", "resource.type ==(")
    )
    args = ["policy", "test", str(bad), str(EXAMPLES / "no-replacement.pass.json")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "TerraformPolicy no-database-replacement: spec.rules[0].expression: 1:" in err


@pytest.mark.parametrize("content", ["{", "[]", '{"resource_changes": 3}'])
def test_a_file_that_is_no_plan_is_refused(tmp_path: Path, content: str) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(content)
    assert main(["policy", "test", str(EXAMPLES / "no-replacement.yaml"), str(plan)]) == 2
