"""Measures the module images of modules/aws, which carry the 905 MB AWS provider:
`python -m tests.aws.measure_images` (after `make aws registry tofu`). One JSON line
last; docs/modules-aws.md records a run.

- build and push: the three role images to a fresh loopback registry, with a fresh
  layer directory (every layer compressed here) and again from it (only uploads);
- the registry: its blobs, to show the provider's layer stored once;
- pull: each image into the process node's empty image cache, as a runner pod's image
  volume is pulled (`controller/dev/node/pull.py`), and again once cached;
- start: in the pulled image, `tofu init` from the image's own mirror and `tofu
  validate`, which starts the provider once: wall seconds and the peak RSS of the
  process tree (`/usr/bin/time`, the largest of tofu and the provider)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from controller.core.contract.roles import Role
from controller.dev.node.pull import Puller
from controller.image import build
from controller.runner.binaries import tofu_dir
from controller.runner.module_image import mirror_config
from runtime.builds import built_dir
from runtime.envtest.registry import Registry
from runtime.registry_build import registry_dir

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("cluster", "machine", "machinepool")
_MAXRSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def push_all(registry: Registry, mirror: Path, runtime: Path, layers: Path) -> dict[str, Any]:
    took: dict[str, float] = {}
    refs: dict[str, str] = {}
    for role in ROLES:
        started = time.monotonic()
        planned = build.plan(ROOT / "modules" / "aws" / role, Role(role), runtime=runtime,
                             providers=mirror)  # fmt: skip
        ref = f"{registry.host}/captf-aws/{role}:{planned.key[:16]}"
        build.push(planned, ref, layers=layers)
        took[role] = round(time.monotonic() - started, 1)
        refs[role] = ref
    return {"seconds": took, "refs": refs}


def blobs(storage: Path) -> list[int]:
    """Sizes of the registry's blobs, largest first."""
    found = storage.rglob("blobs/sha256/*/*/data")
    return sorted((p.stat().st_size for p in found), reverse=True)


async def pull_all(refs: dict[str, str], cache: Path, crane: Path) -> dict[str, float]:
    puller = Puller(cache, crane)
    took = {}
    for role, ref in refs.items():
        started = time.monotonic()
        await puller.pull(ref, "IfNotPresent")
        took[role] = round(time.monotonic() - started, 1)
    return took


def start(rootfs: Path, work: Path) -> dict[str, Any]:
    """init and validate of the cluster module with the image's runtime and mirror."""
    module = work / "module"
    shutil.copytree(rootfs / "captf" / "module", module)
    config = work / "tofurc"
    config.write_text(mirror_config(rootfs / "captf" / "providers"))
    env = {"TF_CLI_CONFIG_FILE": str(config), "CHECKPOINT_DISABLE": "1", "HOME": str(work),
           "PATH": "/usr/bin:/bin", "TF_IN_AUTOMATION": "1"}  # fmt: skip
    out: dict[str, Any] = {}
    for step in (["init", "-input=false"], ["validate"]):
        started = time.monotonic()
        done = subprocess.run(
            ["/usr/bin/time", "-v", str(rootfs / "captf" / "runtime"), *step],
            cwd=module, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        rss = _MAXRSS.search(done.stderr)
        out[step[0]] = {
            "seconds": round(time.monotonic() - started, 1),
            "max_rss_mb": round(int(rss.group(1)) / 1024) if rss else None,
        }
    return out


def main() -> None:
    aws = built_dir(ROOT / "hack" / "aws" / "build.sh", build=False)
    runtime = tofu_dir(build=False) / "tofu"
    tools = registry_dir(build=False)
    binary = next((aws / "mirror").rglob("terraform-provider-aws_*"))
    report: dict[str, Any] = {"provider_mb": round(binary.stat().st_size / 2**20)}
    with tempfile.TemporaryDirectory(prefix="captf-aws-measure-") as scratch:
        work = Path(scratch)
        with Registry(work / "registry-a", bin_dir=tools) as registry:
            cold = push_all(registry, aws / "mirror", runtime, work / "layers")
            report["push_cold_seconds"] = cold["seconds"]
            sizes = blobs(work / "registry-a")
            report["blobs_mb"] = [round(s / 2**20, 1) for s in sizes if s > 2**20]
            report["blobs"] = len(sizes)
            cache = work / "node"
            report["pull_seconds"] = asyncio.run(pull_all(cold["refs"], cache, tools / "crane"))
            report["pull_cached_seconds"] = asyncio.run(
                pull_all(cold["refs"], cache, tools / "crane")
            )
            [image] = [p for p in (cache / "images").iterdir() if p.is_dir()][:1]
            report["start"] = start(image / "rootfs", work / "start")
        with Registry(work / "registry-b", bin_dir=tools) as again:
            report["push_warm_seconds"] = push_all(again, aws / "mirror", runtime,
                                                   work / "layers")["seconds"]  # fmt: skip
    print(json.dumps(report))


if __name__ == "__main__":
    main()
