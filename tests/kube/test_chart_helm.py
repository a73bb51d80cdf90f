"""charts/captf with helm built from its Go module: lint, template, and the rendered
install applied to the real API server.

Rendered with its defaults the chart is the install of manifests/ (less the
Namespace, which `helm install --create-namespace` makes); with
monitoring.enabled=true it adds manifests/monitoring/. Comparing parsed objects
proves the one source of truth holds after Helm's rendering, not only as text."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.envtest import ApiServer
from tests.kube.test_manifests import CERT_MANAGER, CLUSTER_SCOPED, create, load

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "captf"
MANIFESTS = ROOT / "manifests"
Obj = dict[str, Any]


@pytest.fixture(scope="session")
def helm() -> str:
    """The helm binary hack/helm/build.sh built; the test skips when there is none."""
    done = subprocess.run(
        [str(ROOT / "hack" / "helm" / "build.sh"), "--check"], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"no helm build ({done.stderr.strip()}); build it with `make helm`")
    return done.stdout.strip().splitlines()[-1]


def render(helm: str, namespace: str, *sets: str) -> list[Obj]:
    argv = [helm, "template", "captf", str(CHART), "--namespace", namespace, "--include-crds"]
    for value in sets:
        argv += ["--set", value]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def by_identity(docs: list[Obj]) -> dict[tuple[str, str], Obj]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def install() -> list[Obj]:
    """What `kubectl apply -k manifests/` installs, less the Namespace."""
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    docs = [doc for name in kustomization["resources"] for doc in load(MANIFESTS / name)]
    return [d for d in docs if d["kind"] != "Namespace"]


def monitoring() -> list[Obj]:
    docs = [
        doc
        for name in ("service.yaml", "servicemonitor.yaml", "prometheusrule.yaml")
        for doc in load(MANIFESTS / "monitoring" / name)
    ]
    dashboard = (MANIFESTS / "monitoring" / "grafana-dashboard.json").read_text()
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "captf-grafana-dashboard",
            "namespace": "captf-system",
            "labels": {"app.kubernetes.io/name": "captf", "grafana_dashboard": "1"},
        },
        "data": {"captf.json": dashboard.rstrip("\n")},
    }
    return [*docs, configmap]


@pytest.mark.parametrize("sets", [(), ("monitoring.enabled=true",)])
def test_helm_lint_passes(helm: str, sets: tuple[str, ...]) -> None:
    argv = [helm, "lint", "--strict", str(CHART)] + [a for s in sets for a in ("--set", s)]
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_the_default_render_is_the_manifests_install(helm: str) -> None:
    assert by_identity(render(helm, "captf-system")) == by_identity(install())


def test_monitoring_renders_the_monitoring_manifests(helm: str) -> None:
    rendered = by_identity(render(helm, "captf-system", "monitoring.enabled=true"))
    assert rendered == by_identity(install() + monitoring())
    dashboard = rendered[("ConfigMap", "captf-grafana-dashboard")]["data"]["captf.json"]
    assert json.loads(dashboard)["uid"] == "captf"
    rule = rendered[("PrometheusRule", "captf-controller")]
    summaries = [r["annotations"]["summary"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert any("{{ $value }}" in s for s in summaries)  # Prometheus's braces survive Helm


def test_values_change_what_they_name(helm: str) -> None:
    docs = by_identity(
        render(helm, "ops", "image.tag=v9", "replicas=1", "logFormat=text", "image.repository=r/c")
    )
    deployment = docs[("Deployment", "captf-controller")]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert (deployment["metadata"]["namespace"], deployment["spec"]["replicas"]) == ("ops", 1)
    assert container["image"] == "r/c:v9"
    assert "--log-format=text" in container["args"]
    binding = docs[("ClusterRoleBinding", "captf-controller")]
    assert binding["subjects"][0]["namespace"] == "ops"


@pytest.mark.kube
def test_the_rendered_install_is_accepted_by_the_api_server(
    helm: str, apiserver: ApiServer, namespace: str
) -> None:
    """Namespaced objects are created for real in a fresh namespace; cluster-scoped ones
    (fixed names shared by the session) and the CRDs (installed by the session from the
    same files) are dry runs; cert-manager's Issuer and Certificate need its CRDs, which
    this API server does not have."""
    docs = render(helm, namespace)
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert crds == [d for p in sorted((MANIFESTS / "crds").glob("*.yaml")) for d in load(p)]
    created = [
        create(apiserver, doc, namespace, dry_run=doc["kind"] in CLUSTER_SCOPED)
        for doc in docs
        if doc["kind"] not in {"CustomResourceDefinition", *CERT_MANAGER}
    ]
    assert sorted(c["kind"] for c in created) == sorted(
        d["kind"] for d in install() if d["kind"] not in {"CustomResourceDefinition", *CERT_MANAGER}
    )
    deployment = next(c for c in created if c["kind"] == "Deployment")
    assert deployment["metadata"]["namespace"] == namespace
    assert deployment["metadata"]["uid"]  # stored, not a dry run
