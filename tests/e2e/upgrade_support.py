"""What the upgrade test (test_upgrade_e2e.py) needs beside the flow: v0.1.0's code from
history, the images in a mirror, clusterctl's config and runs, and what it reads back."""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from controller.core.basics.names import ANN_SERIAL
from controller.dev import clusterctl
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from runtime.transport import Transport
from tests.capi_support import capi_module_dir, capi_version
from tests.e2e.capi_objects import condition
from tests.e2e.system import Seen
from tests.registry_support import layer, push

ROOT = Path(__file__).resolve().parents[2]
# The release installed first: main as it landed before v1beta1.
OLD_COMMIT = "c42ebdd"
OLD, NEW = "v0.1.0", clusterctl.VERSION
GROUP = "infrastructure.cluster.x-k8s.io"
CAPTF_SYSTEM = "captf-system"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{CAPTF_SYSTEM}/deployments/captf-controller"
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
OUR_KINDS = ("TerraformCluster", "TerraformMachine", "TerraformMachinePool")
# Seconds each phase took, by what it did: printed at the end (pytest -s).
TIMES: dict[str, float] = {}


def unpack_old_release(tree: Path) -> Path:
    """Commit c42ebdd's code, unpacked and byte-compiled: what image captf:v0.1.0 runs."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{OLD_COMMIT}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        pytest.fail(
            f"the upgrade test runs release {OLD} from commit {OLD_COMMIT}, which this clone"
            f" does not have ({found.stderr.strip() or 'no such commit'}): clone with full"
            " history, or run `git fetch --unshallow`"
        )
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", OLD_COMMIT, "runtime", "controller"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    compileall.compile_dir(tree, quiet=1, workers=2)
    return tree


def mirror(registry: Registry, work: Path) -> str:
    """`captf` at both releases in the loopback registry (one small layer each: the node
    runs the program its table names); the repository to name in clusterctl's config."""
    for version in (OLD, NEW):
        marker = layer(work / f"{version}.tar.gz", {"release": version.encode()})
        push(registry, f"captf:{version}", [marker])
    return registry.host


def clusterctl_config(work: Path, name: str, image: Json) -> Path:
    """clusterctl's config: this repository as the terraform provider's, a repository of
    Cluster API's metadata alone for its core provider (installed already: clusterctl
    reads its contract from there and installs nothing), and where the images come from."""
    core = work / "repository" / "cluster-api" / capi_version()
    core.mkdir(parents=True, exist_ok=True)
    shutil.copy(capi_module_dir() / "metadata.yaml", core / "metadata.yaml")
    (core / "core-components.yaml").write_text("")
    ours = ROOT / clusterctl.BASE / NEW / clusterctl.COMPONENTS
    config: Json = {
        "providers": [
            {
                "name": "cluster-api",
                "type": "CoreProvider",
                "url": f"file://{core / 'core-components.yaml'}",
            },
            {"name": clusterctl.NAME, "type": "InfrastructureProvider", "url": f"file://{ours}"},
        ],
        "images": {clusterctl.PROVIDER: image},
    }
    path = work / name
    path.write_text(yaml.safe_dump(config))
    return path


def run_clusterctl(
    build: Path, server: ApiServer, work: Path, config: Path, *args: str, runner_images: str
) -> str:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work / "home"),
        "XDG_CONFIG_HOME": str(work / "home" / ".config"),
        "CLUSTERCTL_DISABLE_VERSIONCHECK": "true",
        # The runner images the controller allows: an operator names them again at each
        # upgrade (clusterctl keeps no variable), here v0.1.0's, which the objects name.
        "TERRAFORM_RUNNER_IMAGES": runner_images,
    }
    argv = [
        str(build / "clusterctl"),
        *args,
        "--config",
        str(config),
        "--kubeconfig",
        str(server.kubeconfig),
    ]
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    TIMES[f"clusterctl {args[0]}"] = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


# -- what the test reads -------------------------------------------------------------


class Reads:
    def __init__(self, transport: Transport, namespace: str) -> None:
        self.api = transport
        self.ns = namespace

    async def get(self, path: str) -> Json:
        return await self.api.request("GET", path)

    async def deployment_on(self, image: str) -> Json | None:
        """The controller's Deployment once both replicas run `image` and are Ready."""
        found = await self.get(DEPLOYMENT)
        status = found.get("status") or {}
        [container] = found["spec"]["template"]["spec"]["containers"]
        done = (
            container["image"] == image
            and status.get("observedGeneration") == found["metadata"]["generation"]
            and status.get("updatedReplicas") == status.get("readyReplicas") == 2
            and status.get("replicas") == 2
        )
        return found if done else None

    async def objects(self, api: str) -> dict[str, Json]:
        """Every CAPTF object of the namespace as `api`, by kind/name."""
        out = {}
        for kind in OUR_KINDS:
            plural = f"{kind.lower()}s"
            listed = await self.get(f"/apis/{api}/namespaces/{self.ns}/{plural}")
            for obj in listed["items"]:
                out[f"{kind}/{obj['metadata']['name']}"] = obj
        return out

    async def serials(self) -> dict[str, str]:
        """The state Secrets' serials, by Secret name."""
        secrets = await self.get(f"/api/v1/namespaces/{self.ns}/secrets")
        return {
            s["metadata"]["name"]: s["metadata"]["annotations"][ANN_SERIAL]
            for s in secrets["items"]
            if ANN_SERIAL in (s["metadata"].get("annotations") or {})
            and s["metadata"]["name"].endswith("-state")
        }

    async def stored_versions(self) -> set[tuple[str, ...]]:
        crds = await self.get(
            f"{CRD_API}?labelSelector={clusterctl.PROVIDER_LABEL}={clusterctl.PROVIDER}"
        )
        return {tuple(c["status"]["storedVersions"]) for c in crds["items"]}


def applies(jobs: Seen) -> dict[str, set[str]]:
    """Every apply Job the watch ever saw, by the object it is for."""
    out: dict[str, set[str]] = {}
    for job in jobs.latest():
        labels = job["metadata"].get("labels") or {}
        if labels.get("captf.io/op") == "apply":
            out.setdefault(labels["captf.io/name"], set()).add(job["metadata"]["uid"])
    return out


def ready(obj: Json | None) -> bool:
    found = condition(obj, "Ready")
    return found is not None and found["status"] == "True"


def settled(obj: Json | None) -> bool:
    """Ready, with no Job running: the last one accounted (the state says Ready as soon as
    the runner saved it; the Job is accounted once the Job controller saw it end)."""
    return ready(obj) and not ((obj or {}).get("status") or {}).get("activeJob")
