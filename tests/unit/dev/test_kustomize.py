"""The kustomization renderer: each supported field on small inputs, and manifests/ itself."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controller.dev.kustomize import KustomizeError, new_image, render, repository_of
from runtime.jsonobj import Json
from tests.paths import REPO

MANIFESTS = REPO / "manifests"

DEPLOYMENT: Json = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d"},
    "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {
                "initContainers": [{"name": "i", "image": "registry.example/team/captf:v1"}],
                "containers": [
                    {"name": "c", "image": "captf"},
                    {"name": "s", "image": "sidecar:1"},
                ],
            },
        },
    },
}
ROLE: Json = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {}}


def _write(directory: Path, kustomization: Json, **files: list[Json]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    for name, docs in files.items():
        (directory / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))
    return directory


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("captf", "captf"),
        ("captf:dev", "captf"),
        ("registry:5000/team/captf:v1", "registry:5000/team/captf"),
        ("registry:5000/captf", "registry:5000/captf"),
        ("captf@sha256:abc", "captf"),
        ("team/captf:v1@sha256:abc", "team/captf"),
    ],
)
def test_repository_of_drops_tag_and_digest(image: str, repository: str) -> None:
    assert repository_of(image) == repository


@pytest.mark.parametrize(
    ("image", "rule", "expected"),
    [
        ("captf", {"newTag": "dev"}, "captf:dev"),
        ("captf:old", {"newTag": "dev"}, "captf:dev"),
        ("captf:v1", {"newName": "registry.example/captf"}, "registry.example/captf:v1"),
        ("captf:v1", {"newName": "r/captf", "newTag": "v2"}, "r/captf:v2"),
        ("captf:v1", {"digest": "sha256:abc"}, "captf@sha256:abc"),
        ("captf", {"newName": "r/captf"}, "r/captf"),
    ],
)
def test_an_images_rule_rewrites_name_tag_and_digest(
    image: str, rule: dict[str, str], expected: str
) -> None:
    assert new_image(image, {"name": "captf", **rule}) == expected


def test_images_apply_to_every_matching_container_and_init_container(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {"resources": ["d.yaml"], "images": [{"name": "captf", "newTag": "dev"}]},
        d=[DEPLOYMENT],
    )
    [deployment] = render(tmp_path)
    pod = deployment["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"]] == ["captf:dev", "sidecar:1"]
    # Another repository that ends in /captf is another image.
    assert pod["initContainers"][0]["image"] == "registry.example/team/captf:v1"


def test_namespace_goes_on_namespaced_objects_only(tmp_path: Path) -> None:
    _write(tmp_path, {"namespace": "ns", "resources": ["d.yaml"]}, d=[DEPLOYMENT, ROLE])
    deployment, role = render(tmp_path)
    assert deployment["metadata"]["namespace"] == "ns"
    assert "namespace" not in role["metadata"]


def test_common_labels_go_on_objects_selectors_and_pod_templates(tmp_path: Path) -> None:
    budget: Json = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "d"}}},
    }
    _write(
        tmp_path,
        {"resources": ["d.yaml"], "commonLabels": {"team": "t"}},
        d=[DEPLOYMENT, ROLE, budget],
    )
    deployment, role, budget = render(tmp_path)
    both = {"app": "d", "team": "t"}
    assert deployment["metadata"]["labels"] == {"team": "t"}
    assert deployment["spec"]["selector"]["matchLabels"] == both
    assert deployment["spec"]["template"]["metadata"]["labels"] == both
    assert role["metadata"]["labels"] == {"team": "t"}
    assert budget["spec"]["selector"]["matchLabels"] == both


def test_resources_keep_their_order_and_a_directory_is_rendered_as_a_base(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "base", {"resources": ["role.yaml"]}, role=[ROLE])
    _write(
        tmp_path / "overlay",
        {"resources": ["d.yaml", "../base"], "commonLabels": {"env": "dev"}},
        d=[DEPLOYMENT],
    )
    kinds = [(o["kind"], o["metadata"]["labels"]) for o in render(tmp_path / "overlay")]
    assert kinds == [("Deployment", {"env": "dev"}), ("ClusterRole", {"env": "dev"})]


@pytest.mark.parametrize(
    ("kustomization", "message"),
    [
        ({"resources": ["d.yaml"], "patches": []}, "not supported here: patches"),
        ({"resources": ["missing.yaml"]}, "resource 'missing.yaml' not found"),
    ],
)
def test_what_it_cannot_render_is_an_error_not_a_silent_skip(
    tmp_path: Path, kustomization: Json, message: str
) -> None:
    _write(tmp_path, kustomization, d=[DEPLOYMENT])
    with pytest.raises(KustomizeError, match=message):
        render(tmp_path)


def test_the_install_renders_in_apply_order_with_the_image_set() -> None:
    objects = render(MANIFESTS)
    placed = [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects]
    assert placed == [
        ("Namespace", "captf-system", None),
        ("CustomResourceDefinition", "terraformclusters.infrastructure.cluster.x-k8s.io", None),
        ("CustomResourceDefinition", "terraformmachinepools.infrastructure.cluster.x-k8s.io", None),
        ("CustomResourceDefinition", "terraformmachines.infrastructure.cluster.x-k8s.io", None),
        (
            "CustomResourceDefinition",
            "terraformclustertemplates.infrastructure.cluster.x-k8s.io",
            None,
        ),
        (
            "CustomResourceDefinition",
            "terraformmachinepooltemplates.infrastructure.cluster.x-k8s.io",
            None,
        ),
        (
            "CustomResourceDefinition",
            "terraformmachinetemplates.infrastructure.cluster.x-k8s.io",
            None,
        ),
        (
            "CustomResourceDefinition",
            "terraformclusteridentities.infrastructure.cluster.x-k8s.io",
            None,
        ),
        ("CustomResourceDefinition", "terraformplans.infrastructure.cluster.x-k8s.io", None),
        ("CustomResourceDefinition", "terraformpolicies.infrastructure.cluster.x-k8s.io", None),
        ("ServiceAccount", "captf-controller", "captf-system"),
        ("ClusterRole", "captf-controller", None),
        ("ClusterRoleBinding", "captf-controller", None),
        ("Role", "captf-controller-leases", "captf-system"),
        ("RoleBinding", "captf-controller-leases", "captf-system"),
        ("ClusterRole", "captf-runner", None),
        ("ClusterRole", "captf-view", None),
        ("ClusterRole", "captf-edit", None),
        ("ClusterRole", "captf-plan-approver", None),
        ("ClusterRole", "captf-state-operator", None),
        ("ClusterRole", "captf-metrics-reader", None),
        ("Deployment", "captf-controller", "captf-system"),
        ("PodDisruptionBudget", "captf-controller", "captf-system"),
        ("Service", "captf-webhook", "captf-system"),
        ("Issuer", "captf-selfsigned", "captf-system"),
        ("Certificate", "captf-webhook-cert", "captf-system"),
        ("ValidatingWebhookConfiguration", "captf-validating-webhook", None),
        ("MutatingWebhookConfiguration", "captf-mutating-webhook", None),
    ]
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "captf:dev"
    # Everything else is the files as written.
    [written] = [
        d
        for d in yaml.safe_load_all((MANIFESTS / "deployment.yaml").read_text())
        if d and d["kind"] == "Deployment"
    ]
    written["spec"]["template"]["spec"]["containers"][0]["image"] = "captf:dev"
    assert deployment == written
