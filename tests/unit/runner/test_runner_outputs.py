"""spec.outputs: the runner writes the outputs Secret after a successful apply."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller.core.jobs.job import Outcome
from controller.runner.ops import execute
from controller.runner.outputs import OutputsError, chosen
from controller.runner.tofu import Exit
from tests.runner_fakes import FakeKube
from tests.unit.runner.test_runner_ops import ScriptedTofu, environ, kube, plan_json, tfstate

__all__ = ["kube"]  # the fixture, shared with test_runner_ops

SHOWN = {
    "endpoint": {"value": "https://10.0.0.1", "type": "string", "sensitive": False},
    "ports": {"value": [80, 443], "type": ["list", "number"], "sensitive": False},
    "password": {"value": "hunter2", "type": "string", "sensitive": True},
}


@dataclass
class WithOutputs(ScriptedTofu):
    shown: dict[str, Any] = field(default_factory=lambda: dict(SHOWN))

    async def run(self, *args: str, capture: bool = False) -> Exit:
        if args[0] == "output":
            self.calls.append(args)
            return Exit(self.codes.get("output", 0), "", orjson.dumps(self.shown))
        return await super().run(*args, capture=capture)


def _data(kube: FakeKube, name: str) -> dict[str, bytes]:
    raw = kube.secrets[name]["data"]
    return {k: base64.b64decode(v) for k, v in raw.items()}


async def test_every_output_goes_to_the_secret_and_only_names_to_the_result(
    kube: FakeKube, tmp_path: Path
) -> None:
    tofu = WithOutputs(tmp_path, plan=plan_json(("x", ["create"])), new_state=tfstate(1))
    env = environ(CAPTF_OUTPUTS_SECRET="c-outputs", CAPTF_OBJECT_UID="uid-c")
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.SUCCESS
    assert tofu.commands()[-1] == "output"
    assert _data(kube, "c-outputs") == {
        "endpoint": b"https://10.0.0.1",
        "ports": b"[80,443]",
        "password": b"hunter2",
    }
    meta = kube.secrets["c-outputs"]["metadata"]
    assert meta["labels"] == {"captf.io/outputs-of": "c", "captf.io/managed-by": "captf"}
    assert meta["ownerReferences"][0] | {} == {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformCluster",
        "name": "c",
        "uid": "uid-c",
    }
    annotation = result.to_json()
    assert orjson.loads(annotation)["outputs"] == ["endpoint", "password", "ports"]
    assert "hunter2" not in annotation


async def test_named_outputs_only_and_a_second_apply_replaces(
    kube: FakeKube, tmp_path: Path
) -> None:
    env = environ(CAPTF_OUTPUTS_SECRET="c-outputs", CAPTF_OUTPUTS_NAMES="endpoint")
    tofu = WithOutputs(tmp_path, plan=plan_json(("x", ["create"])), new_state=tfstate(1))
    await execute(env, kube, tofu, tmp_path)
    tofu.shown["endpoint"] = {"value": "https://10.0.0.2"}
    second = await execute(env, kube, WithOutputs(tmp_path, shown=tofu.shown), tmp_path)
    assert second.outputs == ("endpoint",)
    assert _data(kube, "c-outputs") == {"endpoint": b"https://10.0.0.2"}


async def test_a_missing_output_fails_the_apply_saying_which(
    kube: FakeKube, tmp_path: Path
) -> None:
    env = environ(CAPTF_OUTPUTS_SECRET="c-outputs", CAPTF_OUTPUTS_NAMES="endpoint,nope")
    tofu = WithOutputs(tmp_path, plan=plan_json(("x", ["create"])), new_state=tfstate(1))
    result = await execute(env, kube, tofu, tmp_path)
    assert result.outcome is Outcome.FAILURE
    assert (
        result.message
        == "applied, but outputs Secret c-outputs not written: the module has no output nope"
    )
    assert result.state_serial == 1  # the state is saved all the same
    assert "c-outputs" not in kube.secrets


async def test_without_spec_outputs_nothing_is_written(kube: FakeKube, tmp_path: Path) -> None:
    tofu = WithOutputs(tmp_path, plan=plan_json(("x", ["create"])), new_state=tfstate(1))
    result = await execute(environ(), kube, tofu, tmp_path)
    assert "output" not in tofu.commands()
    assert result.outputs is None
    assert "outputs" not in orjson.loads(result.to_json())


def test_chosen_refuses_unknown_names() -> None:
    with pytest.raises(OutputsError, match="no output a, b"):
        chosen(SHOWN, ("a", "b"))
