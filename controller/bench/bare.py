"""OpenTofu alone, as a yardstick for the runner: `count` runs of the machine module,
`concurrency` at a time, each the OpenTofu commands a runner's apply Job of a
TerraformMachine runs (version, init, plan to a file, show it as JSON, apply it;
controller/runner/ops.py: `output -json` only for an object with spec.outputs, which the
bench's machines have none of), with the same OpenTofu build and the same flags, in a
directory of its own with local state and the contract inputs a runner's generated root
would pass. Their CPU is this process's children's (`ended_children_cpu`), measured by the
caller around `run_all`.

Not quite the runner's work: the runner's root calls the module as `module.role` (its
`init` installs that local module too, a few milliseconds), and its state goes to a
Secret. The machine module uses only the built-in `terraform_data`, so neither `init`
installs a provider."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from controller.core.basics.names import MACHINE
from controller.runner.binaries import runner_environ

FLAGS = ("-input=false", "-no-color")
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("version", "-json"),
    ("init", *FLAGS),
    ("plan", *FLAGS, "-out=bench.plan"),
    ("show", "-json", "-no-color", "bench.plan"),
    ("apply", *FLAGS, "-auto-approve", "bench.plan"),
)


class BareFailed(Exception):
    """A bare run failed: which command, and its exit status."""


def inputs(index: int, cluster: str, namespace: str) -> dict[str, object]:
    """The machine role's contract inputs for machine `index`."""
    name = f"bare-{index}"
    return {
        "captf_contract": "v1alpha1",
        "captf_cluster": {"name": cluster, "namespace": namespace},
        "captf_object": {"kind": MACHINE, "name": name, "namespace": namespace},
        "captf_tags": {"captf.io/cluster": cluster},
        "machine_name": name,
        "bootstrap_data": base64.b64encode(b"#cloud-config\n").decode(),
        "bootstrap_format": "cloud-config",
        "control_plane": False,
    }


def tofu_env(tofu: Path) -> dict[str, str]:
    """The environment a runner gives tofu: this build's mirror, no prompts."""
    given = runner_environ(tofu)
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TF_CLI_CONFIG_FILE": next(v for k, v in given.items() if k.endswith("CLI_CONFIG")),
        "TF_IN_AUTOMATION": "1",
        "TF_INPUT": "0",
        "CHECKPOINT_DISABLE": "1",
    }


async def run_all(module: Path, tofu: Path, count: int, concurrency: int) -> None:
    """`count` runs, at most `concurrency` at once; BareFailed on the first failure."""
    gate = asyncio.Semaphore(concurrency)
    env = tofu_env(tofu)
    binary = tofu / "tofu"
    with tempfile.TemporaryDirectory(prefix="captf-bench-bare-") as scratch:

        async def one(index: int) -> None:
            async with gate:
                where = Path(scratch) / str(index)
                shutil.copytree(module, where)
                variables = inputs(index, "bench", "default")
                (where / "terraform.tfvars.json").write_text(json.dumps(variables))
                for command in COMMANDS:
                    await _tofu(binary, command, where, env)

        async with asyncio.TaskGroup() as group:
            for index in range(count):
                group.create_task(one(index))


async def _tofu(binary: Path, args: tuple[str, ...], cwd: Path, env: Mapping[str, str]) -> None:
    process = await asyncio.create_subprocess_exec(
        str(binary),
        *args,
        cwd=cwd,
        env=dict(env),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    if process.returncode != 0:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise BareFailed(f"tofu {args[0]} exited {process.returncode}: {last[0]}")
