"""The runner with real OpenTofu under the module contract: the example machine module,
unchanged, applied through the root the runner renders from the durable inputs, and
its contract outputs found in the state Secret. The Kubernetes calls go to an
in-memory fake."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller.core.contract import inputs as contract
from controller.core.contract.outputs import Valid, decode
from controller.core.contract.roles import Role
from controller.core.contract.sources import bootstrap_of
from controller.core.jobs.job import Outcome
from controller.core.spec.inputs import Inputs
from controller.runner.binaries import runner_environ
from controller.runner.env import from_environ
from controller.runner.main import serve
from controller.runner.state import OUTPUTS_KEY
from tests.runner_fakes import FakeKube, data_of, secret

pytestmark = pytest.mark.e2e

MACHINE_MODULE = Path(__file__).resolve().parents[2] / "examples" / "modules" / "machine"
BOOTSTRAP = {"metadata": {"name": "m1-boot"}, "data": {"value": base64.b64encode(b"#x\n").decode()}}


def machine_inputs() -> Inputs:
    module = {p.name: p.read_text() for p in sorted(MACHINE_MODULE.glob("*.tf"))}
    given = contract.machine_inputs(
        obj={"metadata": {"name": "tm1", "namespace": "ns"}},
        machine={"metadata": {"name": "m1", "namespace": "ns"}, "spec": {"version": "v1.31.0"}},
        cluster={"metadata": {"name": "prod", "namespace": "ns"}},
        bootstrap=bootstrap_of(BOOTSTRAP),
        exports={"network_id": "net-1"},
    )
    return Inputs(
        module, {}, contract=given, contract_hashed=contract.hashed_inputs(Role.MACHINE, given)
    )


async def run(kube: FakeKube, op: str, inputs: Inputs, build: Path, work: Path) -> Any:
    job = f"tm1-{op}"
    env = from_environ(
        {
            "CAPTF_OP": op,
            "CAPTF_NAMESPACE": "ns",
            "CAPTF_JOB_NAME": job,
            "CAPTF_OBJECT_NAME": "tm1",
            "CAPTF_OBJECT_KIND": "TerraformMachine",
            "CAPTF_INPUTS_SECRET": f"tm1-inputs-{inputs.hash8}",
            "CAPTF_INPUTS_HASH": inputs.hash,
            "CAPTF_STATE_SECRET": "tm1-state",
            "CAPTF_WORK_DIR": str(work),
            **runner_environ(build),
        }
    )
    async with asyncio.timeout(240):
        return await serve(env, kube)


async def test_a_machine_applied_through_its_root_leaves_its_outputs_in_the_state(
    tofu_build: Path, tmp_path: Path
) -> None:
    kube = FakeKube()
    inputs = machine_inputs()
    notes = {"captf.io/inputs-hash": inputs.hash}
    named = f"tm1-inputs-{inputs.hash8}"
    kube.put(secret(named, inputs.secret_data(), notes, kind="TerraformMachine", owner="tm1"))
    applied = await run(kube, "apply", inputs, tofu_build, tmp_path)
    assert applied.outcome is Outcome.SUCCESS, applied.message
    state = kube.secrets["tm1-state"]
    assert state["metadata"]["annotations"]["captf.io/inputs-hash"] == inputs.hash
    outputs = orjson.loads(data_of(state, OUTPUTS_KEY))
    assert outputs["provider_id"] == "captf://prod/m1"
    decoded = decode(Role.MACHINE, outputs)
    assert isinstance(decoded, Valid), decoded

    destroyed = await run(kube, "destroy", inputs, tofu_build, tmp_path)
    assert destroyed.outcome is Outcome.SUCCESS, destroyed.message
    assert "tm1-state" not in kube.secrets  # the state, and its outputs with it
