"""The clusterctl provider repository: this checkout's release is generated from
manifests/ and clusterctl/templates/, the same bytes every time, and keeps clusterctl's
conventions (the provider label on every object, one Namespace, a container named
`manager`, variables prefixed with the provider's name); v0.1.0 is kept as released."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.core import spec_refusals
from controller.core.basics.names import API_VERSION
from controller.dev import clusterctl
from tests.paths import REPO

ROOT = REPO
REPOSITORY = ROOT / clusterctl.REPOSITORY
VARIABLE = re.compile(r"\$\{\s*([A-Za-z0-9_]+)")
# clusterctl's own variables, set by `clusterctl generate cluster` from its flags.
CLUSTERCTL_VARIABLES = {
    "CLUSTER_NAME",
    "NAMESPACE",
    "KUBERNETES_VERSION",
    "CONTROL_PLANE_MACHINE_COUNT",
    "WORKER_MACHINE_COUNT",
}
# The cluster network, named as every provider's templates name it.
NETWORK_VARIABLES = {"POD_CIDR", "SERVICE_CIDR"}


# v0.1.0 as released (c42ebdd): `make chart` no longer writes it.
V0_1_0 = dict(
    line.split()[::-1]
    for line in """
9c7451c9f1fc76b184c485d14457f371e46a5f033e6247d8f30d6c4b1c84dfd3  cluster-template-clusterclass.yaml
d8d7955b1b18f3dae41f14ae6ac1e56b64858d7cb8d5967d90794f9f855796f9  cluster-template-identity.yaml
b83f8b75f0a2c0edc20eaa3b6fc3d4254ecc4b6c7cf274e398d5d1a9748c92ea  cluster-template.yaml
c0aed70b00b2fe6e3eccddca4d883b6df26aa14be0661acb92fd703a18626197  clusterclass-terraform.yaml
2a4bdd6a621801ddaf5530cb74ca188282d0b06bfce694154e0fc4385ba22a4c  infrastructure-components.yaml
52e7db5281199e999272a931fd62010e9b47bd72e33ef20fe277fed5be48aa74  metadata.yaml
""".strip().splitlines()
)


def _release_root(tmp: Path) -> Path:
    """What a release is made of, copied: manifests, templates, the image recipe, and the
    release directories beside it."""
    for part in ("manifests", "clusterctl"):
        shutil.copytree(ROOT / part, tmp / part)
    shutil.copy(ROOT / clusterctl.RECIPE, tmp / clusterctl.RECIPE)
    return tmp


def test_the_checked_in_repository_is_what_the_manifests_generate() -> None:
    assert clusterctl.differences(ROOT) == [], "run `make chart` after changing manifests/"


def test_v0_1_0_is_kept_as_released() -> None:
    directory = ROOT / clusterctl.BASE / "v0.1.0"
    found = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}
    assert found == V0_1_0


def test_a_release_is_the_same_bytes_twice(tmp_path: Path) -> None:
    first, second = _release_root(tmp_path / "a"), _release_root(tmp_path / "b")
    for root in (first, second):
        clusterctl.write(root, "v0.9.1", "registry.example.com/captf")
    made = [root / clusterctl.BASE / "v0.9.1" for root in (first, second)]
    files = [{p.name: p.read_bytes() for p in d.iterdir()} for d in made]
    assert files[0] == files[1]
    assert set(files[0]) == {*clusterctl.HAND_WRITTEN, "infrastructure-components.yaml",
                             "metadata.yaml", "Dockerfile", "checksums.txt"}  # fmt: skip
    lines = files[0]["checksums.txt"].decode().splitlines()
    sums = {name: digest for digest, name in (line.split("  ") for line in lines)}
    assert sums == {
        n: hashlib.sha256(b).hexdigest() for n, b in files[0].items() if n != "checksums.txt"
    }
    text = files[0]["infrastructure-components.yaml"].decode()
    assert "image: registry.example.com/captf:v0.9.1" in text
    assert "--allowed-images=${TERRAFORM_RUNNER_IMAGES:=registry.example.com/captf:v0.9.1}" in text
    series = yaml.safe_load(files[0]["metadata.yaml"])["releaseSeries"]
    assert [(s["major"], s["minor"]) for s in series] == [(0, 1), (0, 2), (0, 9)]


def test_a_release_version_is_vX_Y_Z(tmp_path: Path) -> None:
    with pytest.raises(clusterctl.ClusterctlError, match=r"is not vX\.Y\.Z"):
        clusterctl.files(ROOT, "0.2.0")


def test_the_image_recipe_pins_every_base_image_by_digest() -> None:
    froms = [
        line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("FROM ")
    ]
    assert froms
    for line in froms:
        assert re.fullmatch(r"FROM [a-z0-9.:/-]+@sha256:[0-9a-f]{64}( AS [a-z]+)?", line), line


def test_the_release_is_pyproject_s_version() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{clusterctl.VERSION[1:]}"' in text


def test_every_component_carries_the_provider_label() -> None:
    objects = clusterctl.components(ROOT / "manifests")
    assert objects
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["cluster.x-k8s.io/provider"] == "infrastructure-terraform", obj["kind"]
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == ["captf-system"]
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 9  # the three kinds, their templates, identity, plan, policy
    for crd in crds:
        assert crd["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"] == "v1alpha1_v1beta1"


def test_the_deployment_runs_one_container_named_manager() -> None:
    [deployment] = [
        o for o in clusterctl.components(ROOT / "manifests") if o["kind"] == "Deployment"
    ]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "manager"
    # clusterctl parses images as canonical references.
    assert container["image"] == f"ghcr.io/captf-io/captf:{clusterctl.VERSION}"
    image = f"ghcr.io/captf-io/captf:{clusterctl.VERSION}"
    assert f"--allowed-images=${{TERRAFORM_RUNNER_IMAGES:={image}}}" in container["args"]


def test_component_variables_are_prefixed_with_the_provider_name() -> None:
    text = (REPOSITORY / clusterctl.COMPONENTS).read_text()
    found = set(VARIABLE.findall(text))
    assert found == set(clusterctl.FLAG_VARIABLES.values())
    assert all(name.startswith("TERRAFORM_") for name in found)


@pytest.mark.parametrize("name", clusterctl.HAND_WRITTEN)
def test_template_variables_are_clusterctls_or_prefixed(name: str) -> None:
    text = (REPOSITORY / name).read_text()
    for variable in set(VARIABLE.findall(text)) - CLUSTERCTL_VARIABLES - NETWORK_VARIABLES:
        assert variable.startswith("TERRAFORM_"), f"{name}: ${{{variable}}}"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((REPOSITORY / name).read_text()) if d]


@pytest.mark.parametrize(
    "name",
    ["cluster-template.yaml", "cluster-template-identity.yaml", "clusterclass-terraform.yaml"],
)
def test_templates_name_our_kinds_in_our_api_version(name: str) -> None:
    ours = [d for d in _docs(name) if d["kind"].startswith("Terraform")]
    assert ours
    assert {d["apiVersion"] for d in ours} == {API_VERSION}


def test_the_clusterclass_flavor_names_the_class_clusterctl_adds() -> None:
    """clusterctl adds `clusterclass-<name>.yaml` for a Cluster of class <name>."""
    [cluster] = _docs("cluster-template-clusterclass.yaml")
    [cls] = [d for d in _docs("clusterclass-terraform.yaml") if d["kind"] == "ClusterClass"]
    assert cluster["spec"]["topology"]["classRef"]["name"] == "terraform"
    assert cls["metadata"]["name"] == "terraform"


def test_metadata_maps_the_release_series_to_contract_v1beta2() -> None:
    metadata = yaml.safe_load((REPOSITORY / clusterctl.METADATA).read_text())
    assert metadata["apiVersion"] == "clusterctl.cluster.x-k8s.io/v1alpha3"
    assert metadata["kind"] == "Metadata"
    assert metadata["releaseSeries"] == [
        {"major": 0, "minor": 1, "contract": "v1beta2"},
        {"major": 0, "minor": 2, "contract": "v1beta2"},
    ]


def test_canonical_image_names() -> None:
    assert clusterctl.canonical("captf:dev") == "docker.io/library/captf:dev"
    assert clusterctl.canonical("team/captf:v1") == "docker.io/team/captf:v1"
    assert clusterctl.canonical("registry:5000/captf:v1") == "registry:5000/captf:v1"
    assert clusterctl.canonical("ghcr.io/x/captf@sha256:ab") == "ghcr.io/x/captf@sha256:ab"
    assert clusterctl.canonical("localhost/captf") == "localhost/captf"


def test_a_manifest_change_the_repository_cannot_follow_fails_loudly(tmp_path: Path) -> None:
    _release_root(tmp_path)
    deployment = tmp_path / "manifests" / "deployment.yaml"
    deployment.write_text(deployment.read_text().replace("- --log-format=json\n", ""))
    with pytest.raises(clusterctl.ClusterctlError, match="--log-format"):
        clusterctl.files(tmp_path)
    deployment.write_text(deployment.read_text().replace("- name: manager", "- name: other"))
    with pytest.raises(clusterctl.ClusterctlError, match="manager"):
        clusterctl.files(tmp_path)


def test_a_stale_repository_is_reported(tmp_path: Path) -> None:
    _release_root(tmp_path)
    repository = tmp_path / clusterctl.REPOSITORY
    assert clusterctl.differences(tmp_path) == []
    rbac = tmp_path / "manifests" / "rbac.yaml"
    rbac.write_text(rbac.read_text().replace("verbs: [create]", "verbs: [create, patch]"))
    (repository / "cluster-template-old.yaml").write_text("")
    assert clusterctl.differences(tmp_path) == [
        clusterctl.COMPONENTS,
        clusterctl.CHECKSUMS,
        "cluster-template-old.yaml",
    ]


def test_the_identity_flavor_is_the_default_with_an_identity() -> None:
    """Two hand-written copies of one cluster: they differ in the credentials alone."""
    default = _docs("cluster-template.yaml")
    identity = _docs("cluster-template-identity.yaml")
    [made] = [d for d in identity if d["kind"] == "TerraformClusterIdentity"]
    assert "namespace" not in made["metadata"]  # cluster-scoped
    assert made["spec"]["allowedNamespaces"] == {"list": ["${NAMESPACE}"]}
    rest = [d for d in identity if d is not made]
    assert [d["kind"] for d in rest] == [d["kind"] for d in default]
    for mine, theirs in zip(rest, default, strict=True):
        if mine["kind"] == "TerraformCluster":
            assert mine["spec"]["identityRef"] == {
                "kind": "TerraformClusterIdentity",
                "name": made["metadata"]["name"],
            }
            assert theirs["spec"]["identityRef"]["kind"] == "Secret"
            mine, theirs = _without_identity(mine), _without_identity(theirs)
        assert mine == theirs


def _without_identity(obj: dict[str, Any]) -> dict[str, Any]:
    return obj | {"spec": {k: v for k, v in obj["spec"].items() if k != "identityRef"}}


@pytest.mark.parametrize("name", clusterctl.HAND_WRITTEN)
def test_templates_use_module_images_and_identities(name: str) -> None:
    """No ConfigMap module and no deprecated credentialsRef in what a team starts from."""
    for doc in _docs(name):
        if not doc["kind"].startswith("Terraform") or doc["kind"] == "TerraformClusterIdentity":
            continue
        spec = doc["spec"].get("template", {}).get("spec", doc["spec"])
        assert set(spec["source"]) <= {"image", "imagePullPolicy"}, (name, doc["kind"])
        assert "credentialsRef" not in spec, (name, doc["kind"])


def _class() -> dict[str, Any]:
    [cls] = [d for d in _docs("clusterclass-terraform.yaml") if d["kind"] == "ClusterClass"]
    return cls


def test_every_class_variable_is_patched_and_documented() -> None:
    cls = _class()
    declared = {v["name"] for v in cls["spec"]["variables"]}
    used = {
        patch["valueFrom"]["variable"]
        for p in cls["spec"]["patches"]
        for definition in p["definitions"]
        for patch in definition["jsonPatches"]
    }
    assert used == declared
    header = (REPOSITORY / "clusterclass-terraform.yaml").read_text().split("apiVersion:")[0]
    for variable in declared:
        assert f"#   {variable} " in header, variable


def test_the_cluster_sets_every_required_class_variable() -> None:
    """`clusterctl generate cluster --flavor clusterclass` alone gives a Cluster that
    Cluster API's webhook accepts: every required variable has a value."""
    required = {v["name"] for v in _class()["spec"]["variables"] if v["required"]}
    [cluster] = _docs("cluster-template-clusterclass.yaml")
    assert required <= {v["name"] for v in cluster["spec"]["topology"]["variables"]}


def test_the_identity_kind_travels_with_clusterctl_move() -> None:
    [crd] = [
        o
        for o in clusterctl.components(ROOT / "manifests")
        if o["kind"] == "CustomResourceDefinition"
        and o["spec"]["names"]["kind"] == "TerraformClusterIdentity"
    ]
    assert crd["metadata"]["labels"]["clusterctl.cluster.x-k8s.io/move-hierarchy"] == ""


_DEFAULTED = re.compile(r"\$\{([A-Za-z0-9_]+):=([^}]*)\}")
_PLAIN = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


def _substituted(name: str) -> list[dict[str, Any]]:
    """The template as clusterctl fills it with only clusterctl's own variables given:
    every other variable takes its default."""
    given = {
        "CLUSTER_NAME": "c1",
        "NAMESPACE": "team-a",
        "KUBERNETES_VERSION": "v1.35.0",
        "CONTROL_PLANE_MACHINE_COUNT": "1",
        "WORKER_MACHINE_COUNT": "2",
        # What the aws flavour requires.
        "TERRAFORM_AWS_REGION": "eu-west-1",
        "TERRAFORM_AWS_AMI_ID": "ami-0123456789abcdef0",
    }
    text = _DEFAULTED.sub(lambda m: m.group(2), (REPOSITORY / name).read_text())
    text = _PLAIN.sub(lambda m: given[m.group(1)], text)
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize(
    "name", [n for n in clusterctl.HAND_WRITTEN if n != "cluster-template-clusterclass.yaml"]
)
def test_our_admission_accepts_every_generated_object(name: str) -> None:
    """What the webhook would refuse (reserved variables, the module image's reference,
    the identity reference) is refused of no object the templates generate."""
    ours = [d for d in _substituted(name) if d["kind"].startswith("Terraform")]
    assert ours
    for doc in ours:
        assert spec_refusals(doc["kind"], doc) == [], (name, doc["kind"])


TIMEOUTS = {
    "nodeStartupTimeoutSeconds": "${TERRAFORM_NODE_STARTUP_TIMEOUT_SECONDS:=600}",
    "unhealthyNodeConditions": [
        {
            "type": "Ready",
            "status": status,
            "timeoutSeconds": "${TERRAFORM_NODE_UNHEALTHY_TIMEOUT_SECONDS:=300}",
        }
        for status in ("Unknown", "False")
    ],
}


@pytest.mark.parametrize(
    "name", ["cluster-template.yaml", "cluster-template-identity.yaml", "cluster-template-aws.yaml"]
)
def test_the_templates_ship_a_machinehealthcheck_for_workers_and_control_plane(name: str) -> None:
    """CAPTF's remediation mark does nothing without a MachineHealthCheck selecting the
    Machine: the workers and the control plane each get one, their timeouts variables."""
    docs = _docs(name)
    checks = {d["metadata"]["name"]: d for d in docs if d["kind"] == "MachineHealthCheck"}
    [deployment] = [d for d in docs if d["kind"] == "MachineDeployment"]
    workers = checks[deployment["metadata"]["name"]]["spec"]
    assert workers["clusterName"] == "${CLUSTER_NAME}"
    label = "cluster.x-k8s.io/deployment-name"
    assert workers["selector"] == {"matchLabels": {label: deployment["metadata"]["name"]}}
    control = checks["${CLUSTER_NAME}-control-plane"]["spec"]
    assert control["selector"] == {"matchLabels": {"cluster.x-k8s.io/control-plane": ""}}
    for spec in (workers, control):
        assert spec["checks"] == TIMEOUTS
    substituted = [d for d in _substituted(name) if d["kind"] == "MachineHealthCheck"]
    assert [d["spec"]["checks"]["nodeStartupTimeoutSeconds"] for d in substituted] == [600, 600]


def test_the_class_gives_the_control_plane_and_every_worker_class_a_health_check() -> None:
    spec = _class()["spec"]
    assert spec["controlPlane"]["healthCheck"] == {"checks": TIMEOUTS}
    for worker in spec["workers"]["machineDeployments"]:
        assert worker["healthCheck"] == {"checks": TIMEOUTS}, worker["class"]
    header = (REPOSITORY / "clusterclass-terraform.yaml").read_text().split("apiVersion:")[0]
    for variable in VARIABLE.findall(str(TIMEOUTS)):
        assert f"#   {variable} " in header, variable
