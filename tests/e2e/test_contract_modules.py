"""The example role modules, run unchanged through the generated root by real OpenTofu:
each role's outputs decode as valid and provisioned. Offline: the modules use only
the built-in terraform_data, and the CLI config keeps init off the network."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from controller.core.contract import inputs
from controller.core.contract.outputs import Valid, decode, values_of
from controller.core.contract.provisioned import provisioned
from controller.core.contract.roles import Role
from controller.core.contract.root import MODULE_DIR, ROOT_DIR, render
from controller.core.contract.sources import bootstrap_of
from controller.runner.binaries import runner_environ

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "modules"

CLUSTER = {
    "metadata": {"name": "prod", "namespace": "team-a", "uid": "u-1"},
    "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}}},
}
BOOTSTRAP = {
    "metadata": {"name": "prod-boot"},
    "data": {"value": base64.b64encode(b"#cloud-config\nruncmd: []\n").decode()},
}
EXPORTS = {"network_id": "net-1", "endpoint": {"host": "127.0.0.1", "port": 6443}}


def _object(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a"}, "spec": {}}


def contract_inputs(role: Role) -> dict[str, Any]:
    boot = bootstrap_of(BOOTSTRAP)
    if role is Role.CLUSTER:
        return inputs.cluster_inputs(obj=_object("prod"), cluster=CLUSTER, previous=None)
    if role is Role.MACHINE:
        machine = {"metadata": {"name": "prod-md-0-x", "namespace": "team-a"}, "spec": {}}
        return inputs.machine_inputs(
            obj=_object("prod-md-0-y"),
            machine=machine,
            cluster=CLUSTER,
            bootstrap=boot,
            exports=EXPORTS,
        )
    pool = {"metadata": {"name": "prod-pool", "namespace": "team-a"}, "spec": {"replicas": 3}}
    return inputs.pool_inputs(
        obj=_object("prod-pool"),
        pool=pool,
        cluster=CLUSTER,
        bootstrap=boot,
        exports=EXPORTS,
        cluster_failure_domains=["zone-a", "zone-b"],
        observed_replicas=None,
    )


USER_VARIABLES = {
    Role.CLUSTER: {"endpoint_port": "6443"},  # a ConfigMap's string, converted by the module
    Role.MACHINE: {"address": "10.1.2.3"},
    Role.MACHINEPOOL: {"instance_type": "large"},
}


def tofu(build: Path, cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "TF_CLI_CONFIG_FILE": runner_environ(build)["CAPTF_TOFU_CLI_CONFIG"],
        "TF_IN_AUTOMATION": "1",
        "TF_INPUT": "0",
        "CHECKPOINT_DISABLE": "1",
    }
    done = subprocess.run(
        [str(build / "tofu"), *args, "-no-color"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"tofu {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.parametrize("role", list(Role), ids=lambda role: role.value)
def test_an_example_module_provisions_through_the_generated_root(
    role: Role, tofu_build: Path, tmp_path: Path
) -> None:
    rendered = render(role, contract_inputs(role), user_variables=USER_VARIABLES[role])
    root_dir = tmp_path / ROOT_DIR
    root_dir.mkdir()
    for name, text in rendered.files().items():
        (root_dir / name).write_text(text)
    shutil.copytree(EXAMPLES / role.value, tmp_path / MODULE_DIR)

    tofu(tofu_build, root_dir, "init")
    tofu(tofu_build, root_dir, "apply", "-auto-approve")
    decoded = decode(role, values_of(json.loads(tofu(tofu_build, root_dir, "output", "-json"))))

    assert isinstance(decoded, Valid), decoded
    assert provisioned(role, decoded, applied=True, was_provisioned=False)
    outputs = decoded.outputs
    if role is Role.CLUSTER:
        assert outputs.control_plane_endpoint is not None
        assert (outputs.control_plane_endpoint.host, outputs.control_plane_endpoint.port) == (
            "127.0.0.1",
            6443,
        )
        assert [domain.name for domain in outputs.failure_domains] == ["zone-a", "zone-b"]
        assert outputs.exports["network_id"]
    elif role is Role.MACHINE:
        assert outputs.provider_id == "captf://prod/prod-md-0-x"
        assert outputs.addresses[0].address == "10.1.2.3"
    else:
        assert outputs.replicas == 3
        assert outputs.provider_id_list is not None
        assert len(outputs.provider_id_list) == 3
        assert outputs.instances is not None
        assert [i.failure_domain for i in outputs.instances] == ["zone-a", "zone-b", "zone-a"]
    # Applying again with the same inputs changes nothing: the module is idempotent.
    assert "No changes." in tofu(tofu_build, root_dir, "plan")
