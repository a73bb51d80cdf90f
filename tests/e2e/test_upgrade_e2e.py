"""`clusterctl init` of v0.1.0 and `clusterctl upgrade apply` to this release, for real,
with an apply running across the upgrade.

On a control plane of its own (kube-apiserver, kube-controller-manager), with Cluster
API's manager (ClusterApi), the loopback registry, and a process node running every pod:

1. `clusterctl init --infrastructure terraform:v0.1.0` installs the release directory
   clusterctl/infrastructure-terraform/v0.1.0 as released. Its images come from a mirror
   (clusterctl's `images:` setting, as an air-gapped install names its own registry): the
   loopback registry, where `captf:v0.1.0` and `captf:<this release>` are pushed; the
   node's image table runs `captf:v0.1.0` as v0.1.0's own code, commit c42ebdd unpacked
   from this clone's history (`git archive`), never a copy in the tree. What a cluster
   gives a provider beyond that (cert-manager, a Service network) is stood in for by
   tests/e2e/local_platform.py.
2. A Cluster on a TerraformCluster, a MachineDeployment of two and a MachinePool of two
   are written as v1alpha1 (the cluster's credentials by the old credentialsRef), their
   runner v0.1.0's image. The pool's module waits on a gate file, so its apply Job runs
   until the test opens the gate.
3. With that Job running, `clusterctl upgrade apply` installs this release: clusterctl
   scales v0.1.0's controller to zero, replaces the components (the CRDs now store
   v1beta1 and convert through the new controller's webhook) and starts it.
4. The new controller rewrites every object as v1beta1 and trims the CRDs'
   storedVersions; the gate opens, the Job finishes, and the new controller accounts for
   it, once, with the result the v0.1.0 runner wrote.

Then: no object applied twice (every object keeps the one apply Job it had, and the
pool has one), state serials kept, statuses rebuilt as v1beta1, every object as written
read as v1beta1 with every field and as v1alpha1 unchanged, a scale-up applies a third
machine (the v0.1.0 runner, one release older, under this controller) and a scale-down
destroys one. The time each phase took is printed (pytest -s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from controller.core.basics.names import ANN_ACCOUNTED, ANN_CONVERSION_DATA
from controller.core.conversion.convert import convert
from controller.dev import clusterctl, workload
from controller.dev.clusterapi import ClusterApi
from controller.dev.node import ProcessNode, default_images
from controller.dev.node.images import ImageTable, released
from controller.runner.binaries import runner_environ
from runtime.cache import Informer, Resource, Selection
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.envtest.process import terminate_as_interrupt
from runtime.envtest.registry import Registry
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.capi_support import core_provider, install_control_plane_crd, install_inventory
from tests.e2e.capi_objects import CREDENTIALS, CapiObjects, infrastructure_provisioned
from tests.e2e.local_platform import LocalPlatform
from tests.e2e.system import Seen, ended
from tests.e2e.upgrade_support import (
    CAPTF_SYSTEM,
    GROUP,
    NEW,
    OLD,
    TIMES,
    Reads,
    applies,
    clusterctl_config,
    mirror,
    ready,
    run_clusterctl,
    settled,
    unpack_old_release,
)
from tests.kube.harness import Kube, eventually

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]

OLD_API, NEW_API = f"{GROUP}/v1alpha1", f"{GROUP}/v1beta1"
NS = "upgrade"
CLUSTER, WORKERS, POOL = "up", "up-md", "up-pool"
SCALE = 60.0
WAIT = 240.0
# What a pool's apply writes into its spec (the module contract's outputs).
WRITTEN_BACK = ("providerID", "providerIDList")
# The pool's apply holds until the test opens the gate (the node runs it on this machine).
GATE = """resource "terraform_data" "gate" {{
  provisioner "local-exec" {{
    command = "while [ ! -e {path} ]; do sleep 0.2; done"
  }}
}}
"""


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Commit c42ebdd's code, unpacked and byte-compiled: what image captf:v0.1.0 runs."""
    return unpack_old_release(tmp_path_factory.mktemp(OLD))


@pytest.fixture(scope="module")
def server(capi_build: Path, tofu_build: Path) -> Iterator[ApiServer]:
    with terminate_as_interrupt(), ApiServer(controller_manager=True) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def capi(
    server: ApiServer, capi_build: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ClusterApi]:
    crds = tmp_path_factory.mktemp("controlplane-crd")
    await asyncio.to_thread(install_control_plane_crd, server, crds)
    async with ClusterApi(server, bin_dir=capi_build) as running:
        yield running


# -- the test -----------------------------------------------------------------------


async def test_init_v0_1_0_then_upgrade_while_an_apply_runs(
    server: ApiServer,
    capi: ClusterApi,
    capi_build: Path,
    registry: Registry,
    old_tree: Path,
    tofu_build: Path,
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    (tmp_path / "home").mkdir()
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    await asyncio.to_thread(install_inventory, server, inventory, [core_provider()])
    host = await asyncio.to_thread(mirror, registry, tmp_path)
    old_image, new_image = f"{host}/captf:{OLD}", f"{host}/captf:{NEW}"
    env = runner_environ(tofu_build)
    images = ImageTable({**default_images(env).entries, f"captf:{OLD}": released(old_tree, env)})
    server.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    kube = Kube(server, NS)
    async with open_transport(str(server.kubeconfig)) as transport:
        reads = Reads(transport, NS)
        jobs = Seen()
        watch = Informer(
            transport,
            Resource("batch", "v1", "jobs"),
            clock=LoopClock(),
            selection=Selection(namespace=NS),
        )
        watch.add_handler(jobs.record)
        platform = LocalPlatform(transport, time_scale=SCALE)
        node = ProcessNode(
            transport,
            images=images,
            name="upgrade",
            log_dir=tmp_path / "pods",
            crane=registry.crane,
        )
        async with platform.running(tmp_path / "platform"), watch, node:
            # 1. v0.1.0, as clusterctl installs it.
            started = time.monotonic()
            config = clusterctl_config(tmp_path, "init.yaml", {"repository": host, "tag": OLD})
            await asyncio.to_thread(
                run_clusterctl,
                capi_build,
                server,
                tmp_path,
                config,
                "init",
                "--infrastructure",
                f"{clusterctl.NAME}:{OLD}",
                runner_images=old_image,
            )
            await eventually(
                lambda: reads.deployment_on(old_image),
                within=WAIT,
                what="v0.1.0's controller 2/2 Ready",
            )
            TIMES["v0.1.0 installed and Ready"] = time.monotonic() - started

            # 2. A cluster written as v1alpha1; the pool's apply held at the gate.
            started = time.monotonic()
            objects = CapiObjects(server, NS, infra=OLD_API)
            gate = tmp_path / "gate"
            await _cluster(objects, old_image, gate)
            machines = await _first_applies(objects, jobs)
            TIMES["cluster, 2 machines applied; pool's apply running"] = time.monotonic() - started
            before = await reads.objects(OLD_API)
            serials = await reads.serials()
            applied = applies(jobs)

            # 3. The upgrade, while the pool's apply runs.
            started = time.monotonic()
            config = clusterctl_config(tmp_path, "upgrade.yaml", {"repository": host})
            out = await asyncio.to_thread(
                run_clusterctl,
                capi_build,
                server,
                tmp_path,
                config,
                "upgrade",
                "apply",
                "--infrastructure",
                f"{CAPTF_SYSTEM}/{clusterctl.NAME}:{NEW}",
                runner_images=old_image,
            )
            assert f'version="{NEW}"' in out, out
            await eventually(
                lambda: reads.deployment_on(new_image),
                within=WAIT,
                what=f"{NEW}'s controller 2/2 Ready",
            )
            TIMES[f"upgraded, {NEW} Ready"] = time.monotonic() - started

            # 4. Every object rewritten as v1beta1, storedVersions trimmed; the gate opens.
            started = time.monotonic()

            async def migrated() -> bool:
                return await reads.stored_versions() == {("v1beta1",)}

            await eventually(migrated, within=WAIT, what="storedVersions trimmed to v1beta1")
            TIMES["storage migrated"] = time.monotonic() - started
            [pool_job] = [j for j in jobs.latest() if _is_apply_of(j, POOL)]
            assert ended(pool_job) == "", "the pool's apply ran across the upgrade"
            started = time.monotonic()
            gate.write_text("open")
            pool = await objects.until(
                "TerraformMachinePool", POOL, settled, "the pool Ready, its Job done", within=WAIT
            )
            TIMES["the held apply accounted"] = time.monotonic() - started
            await _accounted_once(kube, reads, pool_job)

            # Nothing applied twice, the states as they were, the statuses rebuilt.
            assert applies(jobs) == {**applied, POOL: {pool_job["metadata"]["uid"]}}
            assert {k: v for k, v in (await reads.serials()).items() if k in serials} == serials
            after = await reads.objects(NEW_API)
            _read_back(before, after, await reads.objects(OLD_API))
            assert pool is not None
            assert pool["status"]["observedGeneration"] == pool["metadata"]["generation"]

            # 5. Scale up and down under the new controller.
            started = time.monotonic()
            await objects.scale("MachineDeployment", WORKERS, 3)
            grown = await _machines(objects, 3)
            [third] = set(grown) - set(machines)
            await objects.until(
                "TerraformMachine", third, ready, "the third machine Ready", within=WAIT
            )
            TIMES["scale-up applied"] = time.monotonic() - started
            started = time.monotonic()
            await objects.scale("MachineDeployment", WORKERS, 2)
            kept = await _machines(objects, 2)
            [gone] = set(grown) - set(kept)
            await objects.until(
                "TerraformMachine",
                gone,
                lambda o: o is None,
                "the removed machine destroyed",
                within=WAIT,
            )
            destroys = [j for j in jobs.latest() if _is_op_of(j, gone, "destroy")]
            assert [ended(j) for j in destroys] == ["Complete"]
            TIMES["scale-down destroyed"] = time.monotonic() - started
    TIMES["total"] = time.monotonic() - began
    for what, seconds in TIMES.items():
        print(f"{what}: {seconds:.1f}s")


async def _cluster(objects: CapiObjects, runner: str, gate: Path) -> None:
    """The Cluster and its TerraformCluster (credentials by credentialsRef), two workers
    of a MachineDeployment, a MachinePool of two whose module waits on `gate`."""
    jobs = {"image": runner, "serviceAccountName": "captf-runner"}
    await objects.credentials()
    for role in ("cluster", "machine"):
        await objects.module(role)
    pool_module = workload.module_configmap("machinepool", "pool-module")
    pool_module["data"]["gate.tf"] = GATE.format(path=gate)
    await objects.create(pool_module)
    spec = objects.infra_spec("cluster-module", jobs=jobs)
    del spec["identityRef"]
    spec["credentialsRef"] = {"name": CREDENTIALS}
    await objects.create(
        {
            "apiVersion": OLD_API,
            "kind": "TerraformCluster",
            "metadata": {"name": CLUSTER},
            "spec": spec,
        }
    )
    infra = {"apiGroup": GROUP, "kind": "TerraformCluster", "name": CLUSTER}
    await objects.create(
        {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": CLUSTER},
            "spec": {"infrastructureRef": infra},
        }
    )
    await objects.until(
        "Cluster", CLUSTER, infrastructure_provisioned, "InfrastructureProvisioned", within=WAIT
    )
    await objects.machine_template(WORKERS, cluster=CLUSTER, module="machine-module", jobs=jobs)
    bootstrap = await objects.bootstrap_secret(f"{CLUSTER}-bootstrap")
    await objects.machine_deployment(
        WORKERS, cluster=CLUSTER, template=WORKERS, replicas=2, bootstrap=bootstrap
    )
    await objects.machine_pool(
        POOL,
        cluster=CLUSTER,
        module="pool-module",
        replicas=2,
        bootstrap=bootstrap,
        jobs=jobs,
        membership={"interval": "0"},
    )


async def _machines(objects: CapiObjects, count: int) -> list[str]:
    """The names of the cluster's TerraformMachines once there are exactly `count` not
    being deleted."""
    listed = await objects.until_listed(
        "TerraformMachine",
        lambda found: (
            len([m for m in found if not m["metadata"].get("deletionTimestamp")]) == count
        ),
        f"{count} TerraformMachines",
        cluster=CLUSTER,
        within=WAIT,
    )
    return [m["metadata"]["name"] for m in listed if not m["metadata"].get("deletionTimestamp")]


async def _first_applies(objects: CapiObjects, jobs: Seen) -> list[str]:
    """Both machines applied and Ready under v0.1.0, the pool's apply Job running."""
    machines = await _machines(objects, 2)
    for name in machines:
        await objects.until("TerraformMachine", name, ready, f"{name} Ready", within=WAIT)

    async def pool_running() -> bool:
        return any(
            _is_apply_of(j, POOL) and (j.get("status") or {}).get("active") for j in jobs.latest()
        )

    await eventually(pool_running, within=WAIT, what="the pool's apply Job running")
    return machines


def _is_op_of(job: Json, name: str, op: str) -> bool:
    labels = job["metadata"].get("labels") or {}
    return labels.get("captf.io/name") == name and labels.get("captf.io/op") == op


def _is_apply_of(job: Json, name: str) -> bool:
    return _is_op_of(job, name, "apply")


async def _accounted_once(kube: Kube, reads: Reads, job: Json) -> None:
    """Marked accounted, with the v0.1.0 runner's result, and told once."""
    name = job["metadata"]["name"]
    found = await reads.get(f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")
    notes = found["metadata"]["annotations"]
    assert notes[ANN_ACCOUNTED] == "true"
    assert '"outcome":"succeeded"' in notes["captf.io/result"]
    # The controller's Events about the Job (the Job controller's own are named apart).
    ours = f"{name}.{job['metadata']['uid']}."
    told = [e for e in await kube.events() if e["metadata"]["name"].startswith(ours)]
    assert [(e["reason"], e.get("count", 1)) for e in told] == [("Applied", 1)]


def _without(spec: Json, keys: tuple[str, ...]) -> Json:
    return {k: v for k, v in spec.items() if k not in keys}


def _read_back(before: dict[str, Json], after: dict[str, Json], again: dict[str, Json]) -> None:
    """Each object as v0.1.0 stored it (v1alpha1) reads as v1beta1 with every field, its
    status rebuilt there, and reads as v1alpha1 as it was."""
    assert set(before) <= set(after)
    for key, old in before.items():
        new = after[key]
        # The pool's apply, held until after the upgrade, then wrote its members back.
        written = WRITTEN_BACK if key == f"TerraformMachinePool/{POOL}" else ()
        assert new["apiVersion"] == NEW_API
        assert _without(new["spec"], written) == convert(old, NEW_API)["spec"], key
        assert new["metadata"].get("labels") == old["metadata"].get("labels"), key
        assert _without(again[key]["spec"], written) == old["spec"], key
        assert ready(new), key
    cluster = after[f"TerraformCluster/{CLUSTER}"]
    assert cluster["spec"]["identityRef"] == {"kind": "Secret", "name": CREDENTIALS}
    assert ANN_CONVERSION_DATA in cluster["metadata"]["annotations"]
    assert again[f"TerraformCluster/{CLUSTER}"]["spec"]["credentialsRef"] == {"name": CREDENTIALS}
