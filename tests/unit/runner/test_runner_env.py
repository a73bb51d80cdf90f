from __future__ import annotations

import pytest

from controller.core.basics.names import Op
from controller.runner.env import EnvError, from_environ

BASE = {
    "CAPTF_OP": "apply",
    "CAPTF_NAMESPACE": "ns",
    "CAPTF_JOB_NAME": "c-apply-1234abcd",
    "CAPTF_OBJECT_NAME": "c",
    "CAPTF_OBJECT_KIND": "TerraformCluster",
    "CAPTF_INPUTS_SECRET": "c-inputs-0123abcd",
    "CAPTF_INPUTS_HASH": "0123abcd" * 8,
    "CAPTF_STATE_SECRET": "c-state",
}


def test_apply_defaults() -> None:
    env = from_environ(BASE)
    assert env.op is Op.APPLY
    assert env.guarded is False
    assert env.tofu == "tofu"
    assert env.tofu_cli_config is None
    assert env.approved_plan_secret is None


def test_guard_approval_and_tofu_overrides() -> None:
    env = from_environ(
        BASE
        | {
            "CAPTF_GUARDED": "true",
            "CAPTF_APPROVED_PLAN_SECRET": "c-plan-1",
            "CAPTF_TOFU": "/opt/tofu",
            "CAPTF_TOFU_CLI_CONFIG": "/opt/tofurc",
        }
    )
    assert env.guarded is True
    assert env.approved_plan_secret == "c-plan-1"
    assert (env.tofu, env.tofu_cli_config) == ("/opt/tofu", "/opt/tofurc")


@pytest.mark.parametrize("missing", ["CAPTF_NAMESPACE", "CAPTF_JOB_NAME", "CAPTF_INPUTS_HASH"])
def test_missing_variable_is_named(missing: str) -> None:
    env = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(EnvError, match=missing):
        from_environ(env)


def test_unknown_op() -> None:
    with pytest.raises(EnvError, match="CAPTF_OP"):
        from_environ(BASE | {"CAPTF_OP": "import"})


def test_plan_needs_plan_secret() -> None:
    with pytest.raises(EnvError, match="CAPTF_PLAN_SECRET"):
        from_environ(BASE | {"CAPTF_OP": "plan"})
    assert from_environ(BASE | {"CAPTF_OP": "plan", "CAPTF_PLAN_SECRET": "p"}).plan_secret == "p"


def test_restore_needs_integer_serial_but_no_inputs() -> None:
    restore = {k: v for k, v in BASE.items() if not k.startswith("CAPTF_INPUTS")}
    restore["CAPTF_OP"] = "restore"
    with pytest.raises(EnvError, match="CAPTF_RESTORE_SERIAL"):
        from_environ(restore | {"CAPTF_RESTORE_SERIAL": "x7"})
    assert from_environ(restore | {"CAPTF_RESTORE_SERIAL": "7"}).restore_serial == 7
