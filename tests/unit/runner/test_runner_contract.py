"""The runner under the module contract: the root/ and module/ layout, the contract
outputs written with the state (`outputs.json`), and a plan that names a contract output
the module lacks."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import orjson
import pytest

from controller.core.basics.names import ANN_RESULT, MACHINE
from controller.core.contract import inputs as contract
from controller.core.contract.sources import Bootstrap
from controller.core.jobs.job import Outcome
from controller.core.jobs.readings import reading_of
from controller.runner.ops import execute
from controller.runner.result import RunnerResult
from controller.runner.state import contract_reading
from controller.runner.workdir import BACKEND_OVERRIDE_FILE, RenderError, render, root_dir
from runtime.jsonobj import Json
from tests.runner_fakes import FakeKube, data_of, secret
from tests.unit.runner.test_runner_ops import HASH, ScriptedTofu, environ

MODULE = b'variable "machine_name" {}\n'


def machine_inputs() -> Json:
    obj = {"metadata": {"name": "c", "namespace": "ns"}}
    cluster = {"metadata": {"name": "cl", "namespace": "ns"}}
    machine = {"metadata": {"name": "m1", "namespace": "ns"}, "spec": {"version": "v1.31.0"}}
    return contract.machine_inputs(
        obj=obj,
        machine=machine,
        cluster=cluster,
        bootstrap=Bootstrap(base64.b64encode(b"boot").decode(), "cloud-config"),
        exports=None,
    )


def contract_secret(inputs: Json | None = None, variables: bytes = b'{"size":"2"}') -> Json:
    data = {"module.main.tf": MODULE, "variables.json": variables}
    data["contract.json"] = orjson.dumps(machine_inputs() if inputs is None else inputs)
    notes = {"captf.io/inputs-hash": HASH}
    return secret("c-inputs-abababab", data, notes, kind="TerraformMachine")


def machine_state(serial: int, outputs: Json) -> bytes:
    wrapped = {name: {"value": value, "type": "string"} for name, value in outputs.items()}
    return json.dumps({"version": 4, "serial": serial, "lineage": "L", "outputs": wrapped}).encode()


@pytest.fixture
def kube() -> FakeKube:
    k = FakeKube()
    k.put(contract_secret())
    return k


def test_contract_inputs_render_a_root_beside_the_module(tmp_path: Path) -> None:
    root = root_dir(tmp_path)
    render(root, contract_secret(), kind="TerraformMachine", secret_variables=("size",))
    assert (tmp_path / "module" / "main.tf").read_bytes() == MODULE
    assert sorted(p.name for p in root.iterdir()) == sorted(
        ["main.tf.json", "terraform.tfvars.json", BACKEND_OVERRIDE_FILE]
    )
    main = json.loads((root / "main.tf.json").read_text())
    assert main["module"]["role"]["source"] == "../module"
    assert main["variable"]["size"] == {"sensitive": True}
    tfvars = json.loads((root / "terraform.tfvars.json").read_text())
    assert tfvars["machine_name"] == "m1"
    assert tfvars["size"] == "2"


def test_without_contract_inputs_the_module_is_the_root(tmp_path: Path) -> None:
    root = root_dir(tmp_path)
    plain = secret("s", {"module.main.tf": MODULE, "variables.json": b"{}"})
    render(root, plain, kind="TerraformMachine")
    assert (root / "main.tf").read_bytes() == MODULE
    assert not (tmp_path / "module").exists()


def test_a_refused_user_variable_is_a_render_error(tmp_path: Path) -> None:
    bad = contract_secret(variables=b'{"machine_name":"x"}')
    with pytest.raises(RenderError, match="machine_name"):
        render(root_dir(tmp_path), bad, kind="TerraformMachine")


def test_contract_inputs_of_the_wrong_role_are_a_render_error(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="inputs"):
        render(root_dir(tmp_path), contract_secret(), kind="TerraformCluster")


def stored_outputs(kube: FakeKube) -> Json:
    parsed: Json = orjson.loads(data_of(kube.secrets["c-state"], "outputs.json"))
    return parsed


async def test_apply_writes_the_contract_outputs_with_the_state(
    kube: FakeKube, tmp_path: Path
) -> None:
    root = root_dir(tmp_path)
    state = machine_state(1, {"provider_id": "captf://cl/m1", "other": "x"})
    tofu = ScriptedTofu(root, new_state=state)
    result = await execute(environ(CAPTF_OBJECT_KIND="TerraformMachine"), kube, tofu, root)
    assert result.outcome.value == "succeeded"
    # Only the role's contract outputs, as the state holds them.
    assert stored_outputs(kube) == {"provider_id": "captf://cl/m1"}


async def test_destroy_leaves_no_outputs(kube: FakeKube, tmp_path: Path) -> None:
    root = root_dir(tmp_path)
    env = environ(CAPTF_OBJECT_KIND="TerraformMachine")
    await execute(
        env, kube, ScriptedTofu(root, new_state=machine_state(1, {"provider_id": "p"})), root
    )
    destroy = environ("destroy", CAPTF_OBJECT_KIND="TerraformMachine")
    await execute(destroy, kube, ScriptedTofu(root, new_state=machine_state(2, {})), root)
    assert "c-state" not in kube.secrets  # the state went, and its outputs with it


async def test_restore_brings_back_the_outputs_of_the_restored_state(
    kube: FakeKube, tmp_path: Path
) -> None:
    root = root_dir(tmp_path)
    env = environ(CAPTF_OBJECT_KIND="TerraformMachine")
    await execute(
        env, kube, ScriptedTofu(root, new_state=machine_state(1, {"provider_id": "a"})), root
    )
    await execute(
        env, kube, ScriptedTofu(root, new_state=machine_state(2, {"provider_id": "b"})), root
    )
    restore = environ("restore", CAPTF_OBJECT_KIND="TerraformMachine", CAPTF_RESTORE_SERIAL="1")
    result = await execute(restore, kube, ScriptedTofu(root), root)
    assert result.outcome.value == "succeeded"
    assert stored_outputs(kube) == {"provider_id": "a"}


UNDECLARED = (
    "Error: Unsupported attribute\n"
    '  on main.tf.json line 1: This object does not have an attribute named "provider_id".\n'
)


async def test_a_plan_naming_an_undeclared_output_reports_outputs_missing(
    kube: FakeKube, tmp_path: Path
) -> None:
    root = root_dir(tmp_path)
    tofu = ScriptedTofu(root, codes={"plan": 1}, stderr=UNDECLARED)
    result = await execute(environ(CAPTF_OBJECT_KIND="TerraformMachine"), kube, tofu, root)
    assert result.outcome.value == "failed"
    assert result.missing_outputs == ("provider_id",)
    body = json.loads(result.to_json())
    assert body["error"] == {
        "kind": "outputs-missing",
        "summary": "Unsupported attribute",
        "outputs": ["provider_id"],
    }


def test_other_failures_carry_no_error_kind() -> None:
    assert "error" not in json.loads(RunnerResult(outcome=Outcome.FAILURE).to_json())


def _dumps(state: Json) -> bytes:
    return json.dumps(state).encode()


def _with_result(result: Json) -> Json:
    return {"metadata": {"annotations": {ANN_RESULT: json.dumps(result)}}}


def test_the_result_carries_the_contract_reading_of_the_state_left() -> None:
    """What the schedule and the remediation mark read (controller/core/jobs/readings.py):
    the outputs still null, the health's state and its `healthy` (a running instance the
    module calls unhealthy counts toward the mark); nothing for a kind outside the
    contract."""
    state = {
        "version": 4,
        "serial": 3,
        "outputs": {
            "provider_id": {"value": None, "type": "string"},
            "addresses": {"value": [], "type": ["list", "string"]},
            "failure_domain": {"value": None, "type": "string"},
            "interruptible": {"value": False, "type": "bool"},
            "health": {"value": {"state": "pending", "healthy": False}, "type": "object"},
        },
    }
    data = json.dumps(state).encode()
    reading = contract_reading(data, MACHINE)
    assert reading == {"pending": ["provider_id"], "health": "pending", "healthy": False}
    ready = json.loads(data)
    ready["outputs"]["provider_id"]["value"] = "captf://demo/m-0"
    ready["outputs"]["health"]["value"] = {"state": "running", "healthy": True}
    assert contract_reading(json.dumps(ready).encode(), MACHINE) == {
        "pending": [],
        "health": "running",
        "healthy": True,
    }
    sick = json.loads(json.dumps(ready))
    sick["outputs"]["health"]["value"] = {"state": "running", "healthy": False}
    sick_reading = reading_of(_with_result({"contract": contract_reading(_dumps(sick), MACHINE)}))
    assert sick_reading is not None
    assert sick_reading.running_unhealthy
    unset = json.loads(json.dumps(ready))
    unset["outputs"]["health"]["value"] = None
    assert contract_reading(_dumps(unset), MACHINE) == {"pending": ["health"], "health": None}
    assert contract_reading(data, "Job") is None
    reading_job = {"metadata": {"annotations": {ANN_RESULT: json.dumps({"contract": reading})}}}
    found = reading_of(reading_job)
    assert found is not None
    assert not found.definite
    assert found.health_pending
