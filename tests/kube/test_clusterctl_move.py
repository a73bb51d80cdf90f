"""The real `clusterctl move` between two local API servers, and what of CAPTF's it carries.

Both servers get what `clusterctl init --infrastructure terraform` would leave: Cluster
API's CRDs (v1beta2 served alone, as ClusterApi installs them), ours, the clusterctl label
on all of them (move discovers only labelled kinds, plus Secrets and ConfigMaps) and the
inventory (`providers.clusterctl.cluster.x-k8s.io`: move refuses a target that lacks a
provider of the source). No manager runs in the first test: the Cluster's status, which
move checks (infrastructure provisioned, control plane initialized), and the Cluster's
owner reference on its TerraformCluster are written by hand, as Cluster API's manager would
write them, so the test passes before CAPTF writes the contract fields.

What move does, read in cmd/clusterctl/client/cluster/{objectgraph,mover}.go of the pinned
module and checked below:
- A Cluster is a "move hierarchy": everything whose ownerReferences chain up to it moves.
  An object labelled `clusterctl.cluster.x-k8s.io/move` moves whatever its owners, unless
  one of its owners is of a kind move does not discover (a Job): such an object is never
  placed in the move sequence, neither created on the target nor deleted from the source.
- A Secret without owners moves if its name is `<cluster>-<purpose>` for one of Cluster
  API's purposes (kubeconfig, ca, etcd, sa, proxy, ...); `-state` is not one.
- Jobs, Pods and anything else outside the labelled CRDs, Secrets and ConfigMaps never move.
- Objects are created on the target without status (the API server ignores status on
  create) and with owner references rewritten to the new uids; labels and annotations are
  copied as they are. The source objects get `clusterctl.cluster.x-k8s.io/delete-for-move`,
  are deleted, and their finalizers stripped."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from controller.core.basics.names import (
    ANN_APPLIED,
    ANN_INPUTS_HASH,
    ANN_SERIAL,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_STATE_PART_OF,
    LABEL_UID,
    MANAGED_BY,
    state_secret_name,
)
from controller.core.basics.names import CLUSTER as CLUSTER_KIND
from controller.dev import clusterctl
from controller.dev.clusterapi import ClusterApi, served_storage_only
from runtime.clock import LoopClock
from runtime.envtest import ApiServer, RequestFailed
from runtime.envtest.process import terminate_as_interrupt
from runtime.jsonobj import Json
from tests.capi_support import (
    CONTROL_PLANE_CRD,
    CONTROL_PLANES,
    MOVE_LABEL,
    OUR_CRDS,
    ROOT,
    install_control_plane_crd,
    install_inventory,
    label_for_clusterctl,
)
from tests.e2e import capi_objects as e2e_objects
from tests.e2e.capi_objects import (
    CREDENTIALS,
    CapiObjects,
    SpecStyle,
    infrastructure_provisioned,
    ref,
)
from tests.e2e.system import SCALE, WAIT, System, in_background, running_system
from tests.e2e.test_clusterapi_e2e import jobs_of
from tests.kube.harness import running_controller

pytestmark = [pytest.mark.kube, pytest.mark.capi]

CAPI = "/apis/cluster.x-k8s.io/v1beta2"
INFRA = "/apis/infrastructure.cluster.x-k8s.io/v1beta1"
CLUSTER_NAME = "cluster.x-k8s.io/cluster-name"
INPUTS_HASH = "0123456789abcdef" * 4
STATE_KEY = "terraform.tfstate"
MOVE_TIMEOUT_SECONDS = 120
#: Wall-clock seconds of the move, printed at the end (pytest -s shows it).
TIMINGS: dict[str, float] = {}


@dataclass
class Moved:
    """The namespace moved, what the source held before, and the clusterctl run."""

    namespace: str
    source: ApiServer
    target: ApiServer
    before: dict[str, Json]  # "<kind>/<name>" -> the source object before the move
    log: str


@pytest.fixture(scope="module")
def target(capi_build: Path) -> Iterator[ApiServer]:
    """The second management cluster, prepared like the first."""
    with terminate_as_interrupt(), ApiServer() as server:
        yield server


def prepare(server: ApiServer, build: Path, workdir: Path) -> list[str]:
    """Cluster API's CRDs, ours, the clusterctl label on them, and the inventory; the
    CRDs labelled."""
    crds = workdir / "capi-crds"
    crds.mkdir(parents=True, exist_ok=True)
    for source in sorted((build / "crds").glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(source.read_text()) if d]
        (crds / source.name).write_text(
            "\n---\n".join(json.dumps(served_storage_only(d)) for d in docs)
        )
    names = server.install_crds(crds) + server.install_crds(OUR_CRDS)
    label_for_clusterctl(server, names)
    inventory = workdir / "inventory"
    inventory.mkdir(exist_ok=True)
    install_inventory(server, inventory)
    return names


def generated_terraform_cluster(build: Path, workdir: Path, name: str) -> Json:
    """The TerraformCluster `clusterctl generate cluster` makes from our repository: its
    spec follows the repository's template, whatever the API of the day."""
    components = ROOT / clusterctl.REPOSITORY / clusterctl.COMPONENTS
    provider = {"name": clusterctl.NAME, "url": f"file://{components}"}
    provider["type"] = "InfrastructureProvider"
    config = workdir / "clusterctl.yaml"
    config.write_text(yaml.safe_dump({"providers": [provider]}))
    args = ["generate", "cluster", name, "--target-namespace", "ns"]
    args += ["--infrastructure", f"{clusterctl.NAME}:{clusterctl.VERSION}"]
    args += ["--kubernetes-version", "v1.35.0", "--control-plane-machine-count", "1"]
    args += ["--worker-machine-count", "1", "--config", str(config)]
    done = run_clusterctl(build, workdir, args, env={"KUBECONFIG": str(workdir / "none")})
    [infra] = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "TerraformCluster"]
    return {"apiVersion": infra["apiVersion"], "kind": infra["kind"], "spec": infra["spec"]}


def run_clusterctl(
    build: Path, workdir: Path, args: list[str], *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "CLUSTERCTL_DISABLE_VERSIONCHECK": "true",
        **(env or {}),
    }
    argv = [str(build / "clusterctl"), *args]
    done = subprocess.run(
        argv, env=environment, capture_output=True, text=True, timeout=MOVE_TIMEOUT_SECONDS
    )
    assert done.returncode == 0, f"clusterctl {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


# -- the source namespace ---------------------------------------------------------------


def create(server: ApiServer, collection: str, body: Json) -> Json:
    try:
        created: Json = server.request("POST", collection, body)
    except RequestFailed as error:
        raise AssertionError(f"{body['kind']}/{body['metadata']['name']}: {error}") from error
    return created


def provisioned_cluster(server: ApiServer, namespace: str, name: str, infra: Json) -> Json:
    """A Cluster and its TerraformCluster, with what Cluster API's manager would have
    written: the Cluster's owner reference and label on the infrastructure, and the
    Cluster status move insists on."""
    cluster = create(
        server,
        f"{CAPI}/namespaces/{namespace}/clusters",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "TerraformCluster",
                    "name": name,
                }
            },
        },
    )
    owner = {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "name": name,
        "uid": cluster["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    meta = {"name": name, "labels": {CLUSTER_NAME: name}, "ownerReferences": [owner]}
    terraform = create(
        server, f"{INFRA}/namespaces/{namespace}/terraformclusters", infra | {"metadata": meta}
    )
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "initialization": {"infrastructureProvisioned": True},
        "conditions": [
            {
                "type": "ControlPlaneInitialized",
                "status": "True",
                "reason": "Initialized",
                "message": "",
                "lastTransitionTime": now,
            }
        ],
    }
    cluster = server.request(
        "PATCH",
        f"{CAPI}/namespaces/{namespace}/clusters/{name}/status",
        {"status": status},
        "application/merge-patch+json",
    )
    return terraform


def captf_secrets(terraform: Json, *, move_label: bool) -> list[Json]:
    """The state, its backup and the durable inputs, as CAPTF writes them (state and
    backups without owners, on purpose; the inputs owned by the object), with the move
    label on state and backups when `move_label` (what CAPTF is to add)."""
    meta = terraform["metadata"]
    name = meta["name"]
    labels = MANAGED_BY | {LABEL_KIND: terraform["kind"], LABEL_NAME: name}
    move = {MOVE_LABEL: ""} if move_label else {}

    def state(serial: int) -> bytes:
        return json.dumps({"version": 4, "serial": serial, "lineage": f"l-{name}"}).encode()

    owner = {
        "apiVersion": terraform["apiVersion"],
        "kind": terraform["kind"],
        "name": name,
        "uid": meta["uid"],
        "controller": False,
        "blockOwnerDeletion": True,
    }
    return [
        _secret(
            f"{name}-state",
            labels | move,
            {ANN_SERIAL: "4", ANN_INPUTS_HASH: INPUTS_HASH},
            {STATE_KEY: state(4)},
        ),
        _secret(
            f"{name}-state-3",
            labels | move | {LABEL_BACKUP_OF: name},
            {ANN_SERIAL: "3", ANN_INPUTS_HASH: INPUTS_HASH},
            {STATE_KEY: state(3)},
        ),
        _secret(
            f"{name}-inputs-{INPUTS_HASH[:8]}",
            labels | {LABEL_UID: meta["uid"]},
            {ANN_INPUTS_HASH: INPUTS_HASH},
            {"module.main.tf": b"# the module\n", "variables.json": b'{"size":1}'},
            owners=[owner],
            immutable=True,
        ),
        *_parts(name, labels, move),
    ]


def _parts(name: str, labels: dict[str, str], move: dict[str, str]) -> list[Json]:
    """A part of a state laid out across Secrets (docs/state.md): no owner and no
    managed-by label, so only the move label carries it (the layout writes it)."""
    if not move:
        return []
    part_labels = {k: v for k, v in labels.items() if k != LABEL_MANAGED_BY}
    part_labels |= move | {LABEL_STATE_PART_OF: name}
    return [
        _secret(
            f"{name}-state-part-0123456789abcdef-0",
            part_labels,
            {},
            {"part": b"\x1f\x8b compressed bytes"},
            immutable=True,
        )
    ]


def _secret(
    name: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    data: dict[str, bytes],
    *,
    owners: list[Json] | None = None,
    immutable: bool = False,
) -> Json:
    meta: Json = {"name": name, "labels": labels, "annotations": annotations}
    if owners:
        meta["ownerReferences"] = owners
    body: Json = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta}
    body["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
    if immutable:
        body["immutable"] = True
    return body


def bystanders(terraform: Json) -> list[Json]:
    """What CAPTF keeps next to an object that move must not (or cannot) carry: an apply
    Job owned by the object, and a plan Secret owned by a Job, labelled to move."""
    meta = terraform["metadata"]
    owner = {
        "apiVersion": terraform["apiVersion"],
        "kind": terraform["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    job: Json = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{meta['name']}-apply-1", "ownerReferences": [owner]},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "runner", "image": "captf:dev"}],
                }
            },
        },
    }
    job_owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": str(uuid.uuid4()),
    }
    plan = _secret(
        f"{meta['name']}-plan-1", {MOVE_LABEL: ""}, {}, {"plan.json": b"{}"}, owners=[job_owner]
    )
    return [job, plan]


def module_configmap(name: str, *, move_label: bool) -> Json:
    labels = {MOVE_LABEL: ""} if move_label else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"main.tf": "# the module\n"},
    }


def collection(namespace: str, obj: Json) -> str:
    kind = obj["kind"]
    if kind in ("Secret", "ConfigMap"):
        return f"/api/v1/namespaces/{namespace}/{kind.lower()}s"
    return f"/apis/batch/v1/namespaces/{namespace}/jobs"


def path_of(namespace: str, key: str) -> str:
    kind, name = key.split("/", 1)
    if kind == "TerraformClusterIdentity":
        return f"{INFRA}/terraformclusteridentities/{name}"
    plural = {
        "Cluster": f"{CAPI}/namespaces/{namespace}/clusters",
        "TerraformCluster": f"{INFRA}/namespaces/{namespace}/terraformclusters",
        "Secret": f"/api/v1/namespaces/{namespace}/secrets",
        "ConfigMap": f"/api/v1/namespaces/{namespace}/configmaps",
        "Job": f"/apis/batch/v1/namespaces/{namespace}/jobs",
    }[kind]
    return f"{plural}/{name}"


def get(server: ApiServer, namespace: str, key: str) -> Json | None:
    try:
        found: Json = server.request("GET", path_of(namespace, key))
    except RequestFailed as error:
        if error.status != 404:
            raise
        return None
    return found


@pytest.fixture(scope="module")
def moved(
    capi_build: Path,
    apiserver: ApiServer,
    target: ApiServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Moved]:
    """One move of a namespace holding two provisioned Clusters: `labelled`, whose state
    and backup carry the move label, and `today`, whose Secrets are as CAPTF writes them
    now; plus the bystanders and two module ConfigMaps, one labelled."""
    workdir = tmp_path_factory.mktemp("move")
    labelled_crds = prepare(apiserver, capi_build, workdir / "source")
    prepare(target, capi_build, workdir / "target")
    namespace = f"move-{uuid.uuid4().hex[:8]}"
    apiserver.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    infra = generated_terraform_cluster(capi_build, workdir, "labelled")
    labelled = provisioned_cluster(apiserver, namespace, "labelled", infra)
    today = provisioned_cluster(apiserver, namespace, "today", infra)
    objects = [
        *captf_secrets(labelled, move_label=True),
        *captf_secrets(today, move_label=False),
        *bystanders(labelled),
        module_configmap("labelled-module", move_label=True),
        module_configmap("today-module", move_label=False),
    ]
    for obj in objects:
        create(apiserver, collection(namespace, obj), obj)
    identity = create(apiserver, f"{INFRA}/terraformclusteridentities", identity_of(namespace))
    before = {
        f"{o['kind']}/{o['metadata']['name']}": apiserver.request(
            "GET", path_of(namespace, f"{o['kind']}/{o['metadata']['name']}")
        )
        for o in [*objects, labelled, today]
    }
    before[f"TerraformClusterIdentity/{namespace}"] = identity
    args = ["move", "--kubeconfig", str(apiserver.kubeconfig)]
    args += ["--to-kubeconfig", str(target.kubeconfig), "--namespace", namespace, "-v", "5"]
    started = time.monotonic()
    done = run_clusterctl(capi_build, workdir, args)
    TIMINGS["move"] = time.monotonic() - started
    (workdir / "move.log").write_text(done.stdout + done.stderr)
    try:
        yield Moved(namespace, apiserver, target, before, done.stdout + done.stderr)
    finally:
        # The source is the session's API server: leave its CRDs as the other tests expect.
        label_for_clusterctl(apiserver, labelled_crds, value=None)
        apiserver.request("DELETE", f"{INFRA}/terraformclusteridentities/{namespace}")


def identity_of(namespace: str) -> Json:
    """A cluster-scoped identity for the moved namespace, named after it."""
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformClusterIdentity",
        "metadata": {"name": namespace},
        "spec": {
            "secretRef": {"name": "cloud", "namespace": "captf-system"},
            "allowedNamespaces": {"list": [namespace]},
        },
    }


@pytest.fixture(scope="module", autouse=True)
def report_timings() -> Iterator[None]:
    yield
    for what, seconds in TIMINGS.items():
        print(f"clusterctl {what}: {seconds:.2f}s")


# -- what arrives -------------------------------------------------------------------------


def test_the_terraformcluster_arrives_with_its_spec_owned_by_the_new_cluster(
    moved: Moved,
) -> None:
    for name in ("labelled", "today"):
        got = get(moved.target, moved.namespace, f"TerraformCluster/{name}")
        assert got is not None, moved.log
        want = moved.before[f"TerraformCluster/{name}"]
        assert got["spec"] == want["spec"]
        assert got["metadata"]["uid"] != want["metadata"]["uid"]
        assert got["metadata"]["labels"] == want["metadata"]["labels"]
        # Move never restores status: CAPTF rebuilds it from spec, Secrets and Jobs.
        assert "status" not in got or not got["status"]
        cluster = get(moved.target, moved.namespace, f"Cluster/{name}")
        assert cluster is not None
        [owner] = got["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("Cluster", cluster["metadata"]["uid"])
        # Resumed on the target once everything was created.
        assert not cluster["spec"].get("paused")


def test_state_backup_and_inputs_arrive_when_the_state_carries_the_move_label(
    moved: Moved,
) -> None:
    """What CAPTF needs to carry on without re-applying: the state with its serial and
    inputs hash, the backup (a restore names it), the durable inputs the hash stands for."""
    terraform = get(moved.target, moved.namespace, "TerraformCluster/labelled")
    assert terraform is not None
    for name in (
        "labelled-state",
        "labelled-state-3",
        f"labelled-inputs-{INPUTS_HASH[:8]}",
        "labelled-state-part-0123456789abcdef-0",  # a part of a state in parts
    ):
        got = get(moved.target, moved.namespace, f"Secret/{name}")
        want = moved.before[f"Secret/{name}"]
        assert got is not None, f"{name} did not move:\n{moved.log}"
        assert got["data"] == want["data"]
        assert got["metadata"].get("annotations") == want["metadata"].get("annotations")
        assert got["metadata"]["labels"] == want["metadata"]["labels"]
        assert got.get("immutable") == want.get("immutable")
        # Gone from the source: move deletes what it carried.
        assert get(moved.source, moved.namespace, f"Secret/{name}") is None
    inputs = get(moved.target, moved.namespace, f"Secret/labelled-inputs-{INPUTS_HASH[:8]}")
    assert inputs is not None
    [owner] = inputs["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("TerraformCluster", terraform["metadata"]["uid"])
    # The copied captf.io/uid label names the source object: nothing may select by it.
    assert inputs["metadata"]["labels"][LABEL_UID] != terraform["metadata"]["uid"]


def test_without_the_label_only_the_owned_inputs_move(moved: Moved) -> None:
    """As CAPTF writes them today: the inputs chain to the Cluster through their owner (the
    TerraformCluster) and move; the state and its backup have no owner, no move label and
    no Cluster API secret suffix, so they stay behind, neither copied nor deleted."""
    inputs = f"Secret/today-inputs-{INPUTS_HASH[:8]}"
    assert get(moved.target, moved.namespace, inputs) is not None
    for key in ("Secret/today-state", "Secret/today-state-3"):
        assert get(moved.target, moved.namespace, key) is None
        left = get(moved.source, moved.namespace, key)
        assert left is not None
        assert left["data"] == moved.before[key]["data"]


def test_jobs_and_what_jobs_own_stay_behind(moved: Moved) -> None:
    """Jobs are never discovered; a Secret owned by a Job is never placed in the move
    sequence, even with the move label, so it stays on the source untouched."""
    assert get(moved.target, moved.namespace, "Job/labelled-apply-1") is None
    assert get(moved.target, moved.namespace, "Secret/labelled-plan-1") is None
    assert get(moved.source, moved.namespace, "Secret/labelled-plan-1") is not None


def test_a_module_configmap_moves_only_with_the_label(moved: Moved) -> None:
    """The module, credentials and variables a user keeps in ConfigMaps and Secrets are
    theirs to label: move carries only labelled ones."""
    assert get(moved.target, moved.namespace, "ConfigMap/labelled-module") is not None
    assert get(moved.target, moved.namespace, "ConfigMap/today-module") is None
    assert get(moved.source, moved.namespace, "ConfigMap/today-module") is not None


def test_identities_travel_and_stay(moved: Moved) -> None:
    """The identity CRD's move-hierarchy label: move creates every identity on the target
    (unless one of that name is there) and never deletes it from the source, where other
    namespaces' objects may still name it. The Secret it names is the platform's to carry
    (it lives in the controller's namespace, which move does not touch)."""
    key = f"TerraformClusterIdentity/{moved.namespace}"
    got = get(moved.target, moved.namespace, key)
    assert got is not None, f"the identity did not move:\n{moved.log}"
    assert got["spec"] == moved.before[key]["spec"]
    assert get(moved.source, moved.namespace, key) is not None


# -- CAPTF on both sides: nothing re-applies -----------------------------------------------

SOURCE_CLUSTER = "c1"
CONTROL_PLANE = "c1-cp"
#: Controller minutes the target is watched, after the status came back, for a Job.
QUIET_MINUTES = 5


@pytest.fixture
def fresh_target(capi_build: Path, tmp_path: Path) -> Iterator[ApiServer]:
    """A second management cluster of its own, prepared like `prepare`'s, with the
    ExampleControlPlane CRD labelled too. No kube-controller-manager: a Job created there
    would sit unrun, which is all the test needs to see it."""
    with terminate_as_interrupt(), ApiServer() as server:
        prepare(server, capi_build, tmp_path / "target")
        (tmp_path / "cp-crd").mkdir()
        label_for_clusterctl(server, install_control_plane_crd(server, tmp_path / "cp-crd"))
        yield server


@pytest_asyncio.fixture(loop_scope="function")
async def source(
    tofu_build: Path, cluster: ApiServer, cluster_namespace: str, tmp_path: Path
) -> AsyncIterator[System]:
    """The CAPTF controller and a process node on the session's `cluster` (tests/e2e's
    `system`)."""
    workdir = tmp_path / "source-system"
    workdir.mkdir()
    started, stop = await in_background(
        running_system(cluster, cluster_namespace, workdir, tofu_build)
    )
    try:
        yield started
    finally:
        await stop()


async def _source_cluster(objects: CapiObjects) -> None:
    """The initialized control plane, the module and credentials (labelled to move: they
    are the user's), and the Cluster with its TerraformCluster."""
    move = {"metadata": {"labels": {MOVE_LABEL: ""}}}
    await objects.credentials()
    await objects.patch("Secret", CREDENTIALS, move)
    module = await objects.module("cluster")
    await objects.patch("ConfigMap", module, move)
    control_plane = {
        "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1",
        "kind": "ExampleControlPlane",
        "metadata": {"name": CONTROL_PLANE},
        "spec": {},
    }
    cp_path = f"{CONTROL_PLANES}/namespaces/{objects.ns}/examplecontrolplanes"
    await objects.call("POST", cp_path, control_plane)
    # Initialized before CAPTF first renders: control_plane_initialized is true from the
    # first apply on, so the source applies once.
    await objects.call(
        "PATCH",
        f"{cp_path}/{CONTROL_PLANE}/status",
        {"status": {"initialization": {"controlPlaneInitialized": True}}},
        content_type="application/merge-patch+json",
    )
    await objects.create(
        {
            "apiVersion": e2e_objects.INFRA,
            "kind": "TerraformCluster",
            "metadata": {"name": SOURCE_CLUSTER},
            "spec": objects.infra_spec(module),
        }
    )
    cp_ref = {
        "apiGroup": "controlplane.cluster.x-k8s.io",
        "kind": "ExampleControlPlane",
        "name": CONTROL_PLANE,
    }
    await objects.create(
        {
            "apiVersion": e2e_objects.CAPI,
            "kind": "Cluster",
            "metadata": {"name": SOURCE_CLUSTER},
            "spec": {
                "infrastructureRef": ref("TerraformCluster", SOURCE_CLUSTER),
                "controlPlaneRef": cp_ref,
            },
        }
    )


def _jobs_of(server: ApiServer, namespace: str, name: str) -> list[Json]:
    found = server.request(
        "GET",
        f"/apis/batch/v1/namespaces/{namespace}/jobs",
        params={"labelSelector": f"{LABEL_NAME}={name}"},
    )
    items: list[Json] = found["items"]
    return items


def _why(jobs: list[Json], obj: Json | None, state: Json) -> str:
    """What the target started, and on what grounds, for the assertion message."""
    started = [(j["metadata"]["name"], j["metadata"].get("annotations")) for j in jobs]
    status = (obj or {}).get("status") or {}
    return f"Jobs: {started}\nstatus: {status}\nstate: {state['metadata'].get('annotations')}"


def _provisioned(obj: Json | None) -> bool:
    status = (obj or {}).get("status") or {}
    return (status.get("initialization") or {}).get("provisioned") is True


async def _applied_and_moved(
    capi_build: Path, cluster: ApiServer, system: System, target: ApiServer, tmp_path: Path
) -> tuple[str, int]:
    """A TerraformCluster applied by CAPTF under Cluster API's manager on the source, moved
    to `target` with the real `clusterctl move`: the move's log, and how many applies the
    source ran (counted once move is done: it waited for any Job still running,
    block-move)."""
    namespace = system.kube.ns
    labelled = prepare(cluster, capi_build, tmp_path / "source")
    labelled.append(CONTROL_PLANE_CRD["metadata"]["name"])
    label_for_clusterctl(cluster, labelled[-1:])
    try:
        objects = CapiObjects(cluster, namespace, style=SpecStyle.SOURCE)
        await _source_cluster(objects)
        await objects.until(
            "Cluster", SOURCE_CLUSTER, infrastructure_provisioned, "provisioned", within=WAIT
        )
        applied = await objects.until(
            "TerraformCluster", SOURCE_CLUSTER, _provisioned, "provisioned", within=WAIT
        )
        assert applied is not None
        args = ["move", "--kubeconfig", str(cluster.kubeconfig), "-v", "5"]
        args += ["--to-kubeconfig", str(target.kubeconfig), "--namespace", namespace]
        target.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        started = time.monotonic()
        done = await asyncio.to_thread(run_clusterctl, capi_build, tmp_path, args)
        TIMINGS["move of a provisioned TerraformCluster"] = time.monotonic() - started
        return done.stdout + done.stderr, len(jobs_of(system, SOURCE_CLUSTER, "apply"))
    finally:
        # The source is the session's server: leave its CRDs as the other tests expect.
        label_for_clusterctl(cluster, labelled, value=None)


@pytest.mark.e2e
async def test_nothing_reapplies_after_the_move(
    capi_build: Path,
    capi_cluster: ClusterApi,
    cluster: ApiServer,
    source: System,
    fresh_target: ApiServer,
    tmp_path: Path,
) -> None:
    """A TerraformCluster applied by CAPTF under Cluster API's manager on the source moves
    with the real `clusterctl move`; CAPTF alone on the target rebuilds its status from
    the moved state Secret and starts no Job."""
    system = source
    namespace = system.kube.ns
    objects = CapiObjects(cluster, namespace, style=SpecStyle.SOURCE)
    log, applies = await _applied_and_moved(capi_build, cluster, system, fresh_target, tmp_path)

    moved = CapiObjects(fresh_target, namespace, style=SpecStyle.SOURCE)
    assert await moved.get("ConfigMap", "cluster-module") is not None, log
    state = await moved.get("Secret", state_secret_name(namespace, CLUSTER_KIND, SOURCE_CLUSTER))
    assert state is not None, f"the state did not move:\n{log}"
    async with running_controller(fresh_target, namespace, LoopClock(SCALE), time_scale=SCALE):
        rebuilt = await moved.until(
            "TerraformCluster", SOURCE_CLUSTER, _provisioned, "status rebuilt", within=WAIT
        )
        await asyncio.sleep(QUIET_MINUTES * 60 / SCALE)
        created = _jobs_of(fresh_target, namespace, SOURCE_CLUSTER)
        last = await moved.get("TerraformCluster", SOURCE_CLUSTER)
    assert created == [], _why(created, last, state)
    assert rebuilt is not None
    assert last is not None
    notes = state["metadata"]["annotations"]
    status = last["status"]
    assert status["initialization"]["provisioned"] is True
    assert status["stateSerial"] == int(notes[ANN_SERIAL])
    assert status["appliedInputsHash"] == notes[ANN_INPUTS_HASH]
    assert not status.get("activeJob")
    # On the source: paused by move, then deleted for it; never destroyed, never re-applied.
    assert jobs_of(system, SOURCE_CLUSTER, "destroy") == []
    assert len(jobs_of(system, SOURCE_CLUSTER, "apply")) == applies
    assert (
        await objects.get("Secret", state_secret_name(namespace, CLUSTER_KIND, SOURCE_CLUSTER))
        is None
    )


def _waits(reason: str) -> Callable[[Json | None], bool]:
    def waiting(obj: Json | None) -> bool:
        shown: object = ((obj or {}).get("status") or {}).get("next", {}).get("reason")
        return shown == reason

    return waiting


@pytest.mark.e2e
async def test_a_state_lost_in_the_move_is_never_applied_again(
    capi_build: Path,
    capi_cluster: ClusterApi,
    cluster: ApiServer,
    source: System,
    fresh_target: ApiServer,
    tmp_path: Path,
) -> None:
    """Issue 37, item 2. The same move, but the state and its backups are lost on the
    target before CAPTF starts there: the TerraformCluster has a new uid, no status, no
    Jobs, and of its durable evidence only the inputs Secret that moved with it, marked
    captf.io/applied when its apply was accounted. It waits StateLost and creates no Job;
    before, it read "applied" from status alone and applied again (InputsChanged), making
    its infrastructure a second time."""
    namespace = source.kube.ns
    log, _ = await _applied_and_moved(capi_build, cluster, source, fresh_target, tmp_path)
    moved = CapiObjects(fresh_target, namespace, style=SpecStyle.SOURCE)
    state_name = state_secret_name(namespace, CLUSTER_KIND, SOURCE_CLUSTER)
    secrets = await moved.call(
        "GET", moved.path("Secret"), params={"labelSelector": f"{LABEL_NAME}={SOURCE_CLUSTER}"}
    )
    names = [s["metadata"]["name"] for s in secrets["items"]]
    assert state_name in names, f"the state did not move:\n{log}"
    inputs = [s for s in secrets["items"] if "-inputs-" in s["metadata"]["name"]]
    assert inputs, f"the inputs did not move:\n{log}"
    assert all(s["metadata"]["annotations"].get(ANN_APPLIED) == "true" for s in inputs)
    for secret in secrets["items"]:
        labels = secret["metadata"].get("labels") or {}
        if secret["metadata"]["name"] == state_name or LABEL_BACKUP_OF in labels:
            await moved.call("DELETE", moved.path("Secret", secret["metadata"]["name"]))
    async with running_controller(fresh_target, namespace, LoopClock(SCALE), time_scale=SCALE):
        waiting = await moved.until(
            "TerraformCluster", SOURCE_CLUSTER, _waits("StateLost"), "StateLost", within=WAIT
        )
        await asyncio.sleep(QUIET_MINUTES * 60 / SCALE)
        created = _jobs_of(fresh_target, namespace, SOURCE_CLUSTER)
        last = await moved.get("TerraformCluster", SOURCE_CLUSTER)
    assert waiting is not None
    assert created == [], f"Jobs: {[j['metadata']['name'] for j in created]}\nstatus: {last}"
    assert last is not None
    assert last["status"]["next"]["reason"] == "StateLost"
    assert "stateSerial" not in last["status"]
