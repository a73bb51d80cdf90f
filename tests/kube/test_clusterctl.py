"""The provider repository under clusterctl/, read by the real clusterctl, and what it
generates admitted and reconciled by the real Cluster API manager.

clusterctl runs offline: its config names the repository by a file:// URL, the version
check is off, and KUBECONFIG names no file (with a kubeconfig it would ask the server
for Cluster API's version; without one, the ClusterClass flavour adds the class from
the repository). The generated objects then go to the session's API server, where our
CRDs are installed, beside Cluster API's CRDs and webhooks (ClusterApi) and the kubeadm
bootstrap and control-plane CRDs (copied from the Go module cache, as hack/capi/build.sh
finds it; their managers do not run, so nothing beyond admission happens to those)."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from controller.dev import clusterctl
from controller.dev.clusterapi import ClusterApi, ClusterApiMissing, capi_dir, served_storage_only
from runtime.envtest import ApiServer, RequestFailed
from runtime.jsonobj import Json

pytestmark = [pytest.mark.kube, pytest.mark.capi]
ON_THE_SERVER = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = ROOT / clusterctl.REPOSITORY
INFRA = "infrastructure.cluster.x-k8s.io/v1beta1"
CAPI = "cluster.x-k8s.io/v1beta2"
KUBEADM_CRDS = ("bootstrap/kubeadm/config/crd/bases", "controlplane/kubeadm/config/crd/bases")
# What Cluster API's kustomization adds to the kubeadm CRDs: the contract they implement.
KUBEADM_CONTRACT = {"cluster.x-k8s.io/v1beta2": "v1beta2"}
PLURALS = {
    "Cluster": "clusters",
    "ClusterClass": "clusterclasses",
    "MachineDeployment": "machinedeployments",
    "KubeadmControlPlane": "kubeadmcontrolplanes",
    "KubeadmControlPlaneTemplate": "kubeadmcontrolplanetemplates",
    "KubeadmConfigTemplate": "kubeadmconfigtemplates",
    "MachineHealthCheck": "machinehealthchecks",
    "TerraformCluster": "terraformclusters",
    "TerraformClusterTemplate": "terraformclustertemplates",
    "TerraformMachineTemplate": "terraformmachinetemplates",
    "TerraformMachinePoolTemplate": "terraformmachinepooltemplates",
}
CLUSTER_FLAGS = (
    "--infrastructure",
    f"{clusterctl.NAME}:{clusterctl.VERSION}",
    "--kubernetes-version",
    "v1.35.0",
    "--worker-machine-count",
    "3",
    "--control-plane-machine-count",
    "1",
)
WAIT_SECONDS = 30.0
#: Wall-clock seconds of each clusterctl run, printed at the end (pytest -s shows them).
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def capi_build() -> Path:
    try:
        return capi_dir(build=False)
    except ClusterApiMissing as exc:
        pytest.skip(f"no Cluster API build ({exc}); build it with `make capi`")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """clusterctl's config (our repository alone) and a home of its own."""
    directory = tmp_path_factory.mktemp("clusterctl")
    provider = {
        "name": clusterctl.NAME,
        "url": f"file://{REPOSITORY / clusterctl.COMPONENTS}",
        "type": "InfrastructureProvider",
    }
    (directory / "clusterctl.yaml").write_text(yaml.safe_dump({"providers": [provider]}))
    (directory / "home").mkdir()
    return directory


def run_clusterctl(
    build: Path, workdir: Path, *args: str, env: dict[str, str] | None = None
) -> str:
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(workdir / "home"),
        "XDG_CONFIG_HOME": str(workdir / "home" / ".config"),
        "KUBECONFIG": str(workdir / "no-such-kubeconfig"),
        "CLUSTERCTL_DISABLE_VERSIONCHECK": "true",
        **(env or {}),
    }
    argv = [str(build / "clusterctl"), *args, "--config", str(workdir / "clusterctl.yaml")]
    started = time.monotonic()
    done = subprocess.run(argv, env=environment, capture_output=True, text=True, timeout=60)
    TIMINGS[" ".join(args)] = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    return done.stdout


def documents(text: str) -> list[Json]:
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture(scope="module", autouse=True)
def report_timings() -> Iterator[None]:
    yield
    for what, seconds in TIMINGS.items():
        print(f"clusterctl {what}: {seconds:.2f}s")


# -- clusterctl, offline ------------------------------------------------------------


def test_generate_provider_gives_our_install_labelled(capi_build: Path, workdir: Path) -> None:
    out = run_clusterctl(
        capi_build, workdir, "generate", "provider", "--infrastructure", clusterctl.NAME
    )
    objects = documents(out)
    ours = clusterctl.components(ROOT / "manifests")
    # The same objects; clusterctl moves cert-manager's (the webhook's Certificate and
    # Issuer) to the front, so the order is compared without them.
    named = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert sorted(named) == sorted((o["kind"], o["metadata"]["name"]) for o in ours)
    cert_manager = {"Certificate", "Issuer"}
    assert [n for n in named if n[0] not in cert_manager] == [
        (o["kind"], o["metadata"]["name"]) for o in ours if o["kind"] not in cert_manager
    ]
    for obj in objects:
        assert obj["metadata"]["labels"][clusterctl.PROVIDER_LABEL] == clusterctl.PROVIDER
    # The CRDs come through untouched: clusterctl's variable substitution leaves the `$`
    # of their patterns and CEL rules alone.
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in ours}
    for got in objects:
        want = by_name[(got["kind"], got["metadata"]["name"])]
        if got["kind"] == "CustomResourceDefinition":
            assert got["spec"] == want["spec"]
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    [manager] = deployment["spec"]["template"]["spec"]["containers"]
    assert manager["name"] == "manager"
    # The release's own image, which objects may run as their runner by default.
    image = clusterctl.release_image()
    assert manager["image"] == image
    assert f"--allowed-images={image}" in manager["args"]
    assert "--allowed-service-accounts=captf-runner" in manager["args"]
    # The container's own variables are kept: $(POD_NAMESPACE) is Kubernetes', not clusterctl's.
    assert "--controller-namespace=$(POD_NAMESPACE)" in manager["args"]


def test_provider_variables_and_image_override(capi_build: Path, workdir: Path) -> None:
    config = yaml.safe_load((workdir / "clusterctl.yaml").read_text())
    config["images"] = {
        clusterctl.PROVIDER: {"repository": "registry.example.com/team", "tag": "v1"}
    }
    overridden = workdir / "override"
    overridden.mkdir(exist_ok=True)
    (overridden / "clusterctl.yaml").write_text(yaml.safe_dump(config))
    (overridden / "home").mkdir(exist_ok=True)
    out = run_clusterctl(
        capi_build,
        overridden,
        "generate",
        "provider",
        "--infrastructure",
        clusterctl.NAME,
        env={"TERRAFORM_RUNNER_IMAGES": "registry.example.com/team/captf:v1"},
    )
    [deployment] = [o for o in documents(out) if o["kind"] == "Deployment"]
    [manager] = deployment["spec"]["template"]["spec"]["containers"]
    assert manager["image"] == "registry.example.com/team/captf:v1"
    assert "--allowed-images=registry.example.com/team/captf:v1" in manager["args"]
    described = run_clusterctl(
        capi_build, workdir, "generate", "provider", "--infrastructure", clusterctl.NAME,
        "--describe",
    )  # fmt: skip
    for name in clusterctl.FLAG_VARIABLES.values():
        assert f"- {name}" in described


def test_generate_cluster_names_our_kinds(capi_build: Path, workdir: Path) -> None:
    out = run_clusterctl(
        capi_build, workdir, "generate", "cluster", "test", *CLUSTER_FLAGS,
        "--target-namespace", "ns",
    )  # fmt: skip
    objects = {(o["kind"], o["metadata"]["name"]): o for o in documents(out)}
    assert set(objects) == {
        ("Cluster", "test"),
        ("TerraformCluster", "test"),
        ("KubeadmControlPlane", "test-control-plane"),
        ("TerraformMachineTemplate", "test-control-plane"),
        ("MachineDeployment", "test-md-0"),
        ("TerraformMachineTemplate", "test-md-0"),
        ("KubeadmConfigTemplate", "test-md-0"),
        ("MachineHealthCheck", "test-md-0"),
        ("MachineHealthCheck", "test-control-plane"),
    }
    assert {o["metadata"]["namespace"] for o in objects.values()} == {"ns"}
    cluster = objects["Cluster", "test"]
    assert cluster["spec"]["infrastructureRef"]["kind"] == "TerraformCluster"
    assert objects["TerraformCluster", "test"]["apiVersion"] == INFRA
    deployment = objects["MachineDeployment", "test-md-0"]["spec"]
    assert deployment["replicas"] == 3
    assert deployment["template"]["spec"]["version"] == "v1.35.0"
    assert deployment["template"]["spec"]["infrastructureRef"]["kind"] == (
        "TerraformMachineTemplate"
    )
    assert objects["KubeadmControlPlane", "test-control-plane"]["spec"]["replicas"] == 1
    workers = objects["MachineHealthCheck", "test-md-0"]["spec"]
    assert workers["selector"]["matchLabels"] == {"cluster.x-k8s.io/deployment-name": "test-md-0"}
    assert workers["checks"]["nodeStartupTimeoutSeconds"] == 600


def test_generate_cluster_clusterclass_flavor_adds_the_class(
    capi_build: Path, workdir: Path
) -> None:
    out = run_clusterctl(
        capi_build, workdir, "generate", "cluster", "test", *CLUSTER_FLAGS,
        "--flavor", "clusterclass", "--target-namespace", "ns",
    )  # fmt: skip
    objects = documents(out)
    kinds = [o["kind"] for o in objects]
    assert kinds.count("ClusterClass") == 1
    for kind in ("TerraformClusterTemplate", "TerraformMachineTemplate"):
        assert kind in kinds
    assert "TerraformMachinePoolTemplate" in kinds
    [cluster] = [o for o in objects if o["kind"] == "Cluster"]
    topology = cluster["spec"]["topology"]
    assert topology["classRef"]["name"] == "terraform"
    assert topology["workers"]["machineDeployments"][0]["replicas"] == 3


AWS = {"TERRAFORM_AWS_REGION": "eu-west-1", "TERRAFORM_AWS_AMI_ID": "ami-0123456789abcdef0"}


def test_generate_cluster_aws_flavor_runs_the_aws_modules(capi_build: Path, workdir: Path) -> None:
    """The aws flavour: the three objects of our kinds on modules/aws's images, their
    variables typed as the modules declare them (an unset optional one is null)."""
    out = run_clusterctl(
        capi_build, workdir, "generate", "cluster", "aws", *CLUSTER_FLAGS,
        "--flavor", "aws", "--target-namespace", "ns",
        env=AWS | {"TERRAFORM_AWS_MODULE_IMAGES": "registry.example/aws",
                   "TERRAFORM_AWS_SSH_KEY_NAME": "ops"},
    )  # fmt: skip
    objects = {(o["kind"], o["metadata"]["name"]): o for o in documents(out)}
    infra = objects["TerraformCluster", "aws"]["spec"]
    assert infra["source"]["image"] == "registry.example/aws/cluster:v1"
    assert infra["variables"] == {"region": "eu-west-1", "availability_zones": []}
    assert infra["identityRef"] == {"kind": "Secret", "name": "aws-credentials"}
    workers = objects["TerraformMachineTemplate", "aws-md-0"]["spec"]["template"]["spec"]
    assert workers["source"]["image"] == "registry.example/aws/machine:v1"
    assert workers["variables"] == {
        "region": "eu-west-1",
        "ami_id": "ami-0123456789abcdef0",
        "instance_type": "m6i.large",
        "key_name": "ops",
        "instance_profile": None,
    }
    # The kubelet registers with the providerID the machine module reports.
    config = objects["KubeadmConfigTemplate", "aws-md-0"]["spec"]["template"]["spec"]
    [arg] = config["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    assert arg == {
        "name": "provider-id",
        "value": "aws:///{{ v1.availability_zone }}/{{ v1.instance_id }}",
    }


# -- on the API server, with Cluster API's manager ---------------------------------------


def kubeadm_crds(directory: Path) -> Path:
    """The kubeadm bootstrap and control-plane CRDs of the pinned Cluster API module,
    serving v1beta2 alone and labelled with their contract, written into `directory`."""
    hack = ROOT / "hack" / "capi"
    done = subprocess.run(
        ["go", "mod", "download", "-json", f"sigs.k8s.io/cluster-api@{_capi_version(hack)}"],
        cwd=hack,
        capture_output=True,
        text=True,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    if done.returncode != 0:
        pytest.skip(f"Cluster API's module is not in the Go module cache: {done.stderr[-300:]}")
    source = Path(json.loads(done.stdout)["Dir"])
    for base in KUBEADM_CRDS:
        for path in sorted((source / base).glob("*.yaml")):
            [crd] = documents(path.read_text())
            fitted = served_storage_only(crd)
            fitted["metadata"].setdefault("labels", {}).update(KUBEADM_CONTRACT)
            (directory / path.name).write_text(json.dumps(fitted))
    return directory


def _capi_version(hack: Path) -> str:
    for line in (hack / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:2] == ["require", "sigs.k8s.io/cluster-api"]:
            return words[2]
    raise AssertionError("hack/capi/go.mod requires no sigs.k8s.io/cluster-api")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def capi(
    capi_build: Path, apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ClusterApi]:
    crds = kubeadm_crds(tmp_path_factory.mktemp("kubeadm-crds"))
    await asyncio.to_thread(apiserver.install_crds, crds)
    async with ClusterApi(apiserver, bin_dir=capi_build) as running:
        yield running


def collection(obj: Json, namespace: str) -> str:
    return f"/apis/{obj['apiVersion']}/namespaces/{namespace}/{PLURALS[obj['kind']]}"


async def create_all(server: ApiServer, objects: list[Json], namespace: str) -> None:
    for obj in objects:
        body = copy.deepcopy(obj)
        body["metadata"]["namespace"] = namespace
        try:
            await asyncio.to_thread(server.request, "POST", collection(obj, namespace), body)
        except RequestFailed as error:
            raise AssertionError(f"{obj['kind']}/{obj['metadata']['name']}: {error}") from error


async def wait_for(server: ApiServer, path: str, done: Any, what: str) -> Json:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            obj = await asyncio.to_thread(server.request, "GET", path)
            if done(obj):
                return obj
        except RequestFailed as error:
            if error.status != 404:
                raise
            obj = {}
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} after {WAIT_SECONDS:.0f}s: {obj}")
        await asyncio.sleep(0.2)


@ON_THE_SERVER
async def test_the_generated_cluster_is_accepted_and_reconciled(
    capi: ClusterApi, apiserver: ApiServer, capi_build: Path, workdir: Path, namespace: str
) -> None:
    out = run_clusterctl(
        capi_build, workdir, "generate", "cluster", "gen", *CLUSTER_FLAGS,
        "--target-namespace", namespace,
    )  # fmt: skip
    await create_all(apiserver, documents(out), namespace)
    base = f"/apis/{CAPI}/namespaces/{namespace}"
    cluster = await wait_for(
        apiserver,
        f"{base}/clusters/gen",
        lambda c: "cluster.cluster.x-k8s.io" in c["metadata"].get("finalizers", []),
        "the Cluster controller took the Cluster",
    )
    assert cluster["spec"]["infrastructureRef"]["kind"] == "TerraformCluster"
    # The Cluster controller owns its infrastructure: it found our CRD by the contract label.
    infra = await wait_for(
        apiserver,
        f"/apis/{INFRA}/namespaces/{namespace}/terraformclusters/gen",
        lambda o: any(r["kind"] == "Cluster" for r in o["metadata"].get("ownerReferences", [])),
        "the Cluster owns its TerraformCluster",
    )
    assert infra["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "gen"
    deployment = await asyncio.to_thread(
        apiserver.request, "GET", f"{base}/machinedeployments/gen-md-0"
    )
    assert deployment["spec"]["selector"]["matchLabels"]  # defaulted by the webhook


@ON_THE_SERVER
async def test_the_clusterclass_flavor_makes_a_terraformcluster_from_the_template(
    capi: ClusterApi, apiserver: ApiServer, capi_build: Path, workdir: Path, namespace: str
) -> None:
    """The ClusterClass controller resolves the class's templates (our CRDs, found by their
    contract label), and the topology controller makes the Cluster's TerraformCluster
    from the TerraformClusterTemplate by server-side apply."""
    out = run_clusterctl(
        capi_build, workdir, "generate", "cluster", "cc", *CLUSTER_FLAGS,
        "--flavor", "clusterclass", "--target-namespace", namespace,
    )  # fmt: skip
    objects = documents(out)
    [cluster] = [o for o in objects if o["kind"] == "Cluster"]
    await create_all(apiserver, [o for o in objects if o["kind"] != "Cluster"], namespace)
    await wait_for(
        apiserver,
        f"/apis/{CAPI}/namespaces/{namespace}/clusterclasses/terraform",
        lambda c: c.get("status", {}).get("observedGeneration") == c["metadata"]["generation"],
        "the ClusterClass was reconciled",
    )
    await create_all(apiserver, [cluster], namespace)
    made = await wait_for(
        apiserver,
        f"/apis/{CAPI}/namespaces/{namespace}/clusters/cc",
        lambda c: c["spec"].get("infrastructureRef", {}).get("kind") == "TerraformCluster",
        "the topology controller made the infrastructure",
    )
    name = made["spec"]["infrastructureRef"]["name"]
    infra = await asyncio.to_thread(
        apiserver.request, "GET", f"/apis/{INFRA}/namespaces/{namespace}/terraformclusters/{name}"
    )
    [template] = [o for o in objects if o["kind"] == "TerraformClusterTemplate"]
    want = template["spec"]["template"]["spec"]
    # The class's patches put the Cluster's variables (and the class's defaults) in.
    values = {v["name"]: v["value"] for v in cluster["spec"]["topology"]["variables"]}
    assert infra["spec"]["source"] == {
        "image": values["clusterModuleImage"],
        "imagePullPolicy": "IfNotPresent",
    }
    assert infra["spec"]["identityRef"] == values["identity"]
    assert infra["spec"]["variables"] == {}
    assert infra["spec"]["jobs"]["image"] == want["jobs"]["image"]  # the rest defaulted
    # The class's health check for the control plane: the topology controller makes its
    # MachineHealthCheck, which CAPTF's remediation mark needs.
    checks = await wait_for(
        apiserver,
        f"/apis/{CAPI}/namespaces/{namespace}/machinehealthchecks",
        lambda found: any(_is_control_planes(c, "cc") for c in found["items"]),
        "the topology controller made the control plane's MachineHealthCheck",
    )
    [check] = [c for c in checks["items"] if _is_control_planes(c, "cc")]
    assert check["spec"]["checks"]["nodeStartupTimeoutSeconds"] == 600


def _is_control_planes(check: Json, cluster: str) -> bool:
    labels = check["spec"]["selector"].get("matchLabels") or {}
    return check["spec"]["clusterName"] == cluster and "cluster.x-k8s.io/control-plane" in labels


@ON_THE_SERVER
async def test_the_identity_flavor_is_accepted(
    capi: ClusterApi, apiserver: ApiServer, capi_build: Path, workdir: Path, namespace: str
) -> None:
    """The identity and the TerraformCluster naming it pass our CRDs' validation, and the
    cluster-scoped identity loses the namespace clusterctl gave it."""
    out = run_clusterctl(
        capi_build, workdir, "generate", "cluster", "idc", *CLUSTER_FLAGS,
        "--flavor", "identity", "--target-namespace", namespace,
    )  # fmt: skip
    objects = documents(out)
    [identity] = [o for o in objects if o["kind"] == "TerraformClusterIdentity"]
    body = copy.deepcopy(identity)
    body["metadata"]["name"] = f"idc-{namespace}"
    created = await asyncio.to_thread(
        apiserver.request, "POST", f"/apis/{INFRA}/terraformclusteridentities", body
    )
    try:
        assert "namespace" not in created["metadata"]
        assert created["spec"]["allowedNamespaces"] == {"list": [namespace]}
        rest = [o for o in objects if o["kind"] != "TerraformClusterIdentity"]
        for obj in rest:
            if obj["kind"] == "TerraformCluster":
                obj["spec"]["identityRef"]["name"] = body["metadata"]["name"]
        await create_all(apiserver, rest, namespace)
    finally:
        await asyncio.to_thread(
            apiserver.request,
            "DELETE",
            f"/apis/{INFRA}/terraformclusteridentities/{body['metadata']['name']}",
        )


@ON_THE_SERVER
async def test_the_aws_flavor_is_accepted(
    capi: ClusterApi, apiserver: ApiServer, capi_build: Path, workdir: Path, namespace: str
) -> None:
    """Every object of the aws flavour passes validation (our CRDs, Cluster API's and
    kubeadm's webhooks and schemas), and the Cluster takes its TerraformCluster."""
    out = run_clusterctl(
        capi_build, workdir, "generate", "cluster", "awsc", *CLUSTER_FLAGS,
        "--flavor", "aws", "--target-namespace", namespace, env=AWS,
    )  # fmt: skip
    await create_all(apiserver, documents(out), namespace)
    infra = await wait_for(
        apiserver,
        f"/apis/{INFRA}/namespaces/{namespace}/terraformclusters/awsc",
        lambda o: any(r["kind"] == "Cluster" for r in o["metadata"].get("ownerReferences", [])),
        "the Cluster owns its TerraformCluster",
    )
    assert infra["spec"]["variables"]["region"] == "eu-west-1"
