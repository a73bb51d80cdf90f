"""What tests that run Cluster API need on an API server beyond ClusterApi itself: the
build (or a skip), a minimal control-plane provider, and what `clusterctl init` would have
left behind for `clusterctl move` (its inventory, and the clusterctl label on every CRD).

Nothing here starts a process: the fixtures in tests/conftest.py and the test modules do."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from controller.dev import clusterctl
from controller.dev.clusterapi import ClusterApiMissing, capi_dir
from runtime.envtest import ApiServer, RequestFailed
from runtime.envtest.crds import crd_documents
from runtime.jsonobj import Json

ROOT = Path(__file__).resolve().parents[1]
HACK = ROOT / "hack" / "capi"
OUR_CRDS = ROOT / "manifests" / "crds"

# clusterctl's move discovers only the kinds whose CRD carries this label (clusterctl init
# puts it on every CRD it installs), plus Secrets and ConfigMaps.
CLUSTERCTL_LABEL = "clusterctl.cluster.x-k8s.io"
# On an object: move it whatever its owners say (cmd/clusterctl/api/v1alpha3/labels.go).
MOVE_LABEL = "clusterctl.cluster.x-k8s.io/move"
INVENTORY_API = "/apis/clusterctl.cluster.x-k8s.io/v1alpha3"
CORE_NAMESPACE = "capi-system"
# The Namespace of clusterctl/infrastructure-terraform/*/infrastructure-components.yaml.
PROVIDER_NAMESPACE = "captf-system"

# The smallest control-plane provider the contract allows: since v1.14 a Cluster needs a
# controlPlaneRef, an infrastructureRef or a topology, and `clusterctl move` wants the
# control plane initialized, which the Cluster controller reads from this object's
# `status.initialization.controlPlaneInitialized` (set by hand: no manager runs for it).
CONTROL_PLANE_CRD: Json = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "examplecontrolplanes.controlplane.cluster.x-k8s.io",
        "labels": {"cluster.x-k8s.io/v1beta2": "v1alpha1"},
    },
    "spec": {
        "group": "controlplane.cluster.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "kind": "ExampleControlPlane",
            "listKind": "ExampleControlPlaneList",
            "plural": "examplecontrolplanes",
            "singular": "examplecontrolplane",
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
CONTROL_PLANES = "/apis/controlplane.cluster.x-k8s.io/v1alpha1"


def capi_build_or_skip() -> Path:
    """The hack/capi build directory, or a skip saying how to build it."""
    try:
        return capi_dir(build=False)
    except ClusterApiMissing as exc:
        pytest.skip(f"no Cluster API build ({exc}); build it with `make capi`")


def capi_version() -> str:
    for line in (HACK / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:2] == ["require", "sigs.k8s.io/cluster-api"]:
            return words[2]
    raise AssertionError("hack/capi/go.mod requires no sigs.k8s.io/cluster-api")


def capi_module_dir() -> Path:
    """Cluster API's module in the Go module cache (hack/capi/build.sh put it there), or a
    skip: the clusterctl inventory CRD is read from it, not committed."""
    done = subprocess.run(
        ["go", "mod", "download", "-json", f"sigs.k8s.io/cluster-api@{capi_version()}"],
        cwd=HACK,
        capture_output=True,
        text=True,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    if done.returncode != 0:
        pytest.skip(f"Cluster API's module is not in the Go module cache: {done.stderr[-300:]}")
    return Path(json.loads(done.stdout)["Dir"])


def install_control_plane_crd(server: ApiServer, directory: Path) -> list[str]:
    (directory / "controlplane.yaml").write_text(json.dumps(CONTROL_PLANE_CRD))
    return server.install_crds(directory)


def our_crd_names() -> list[str]:
    return [doc["metadata"]["name"] for doc in crd_documents(OUR_CRDS)]


def label_for_clusterctl(server: ApiServer, crds: Iterable[str], *, value: str | None = "") -> None:
    """Put the clusterctl label on `crds`, as `clusterctl init` does on what it installs
    (value None: take it off again)."""
    patch = {"metadata": {"labels": {CLUSTERCTL_LABEL: value}}}
    for name in crds:
        server.request(
            "PATCH",
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
            patch,
            "application/merge-patch+json",
        )


def core_provider() -> Json:
    """The core provider alone, as `clusterctl init` records it in the inventory."""
    return _provider("cluster-api", CORE_NAMESPACE, "CoreProvider", capi_version())


def providers() -> list[Json]:
    """The inventory `clusterctl init --infrastructure terraform` would record: the core
    provider and ours, each in its provider's namespace. Move checks that every provider of
    the source is on the target at the same version or newer, and lists Secrets in each
    infrastructure provider's namespace too."""
    return [
        _provider("cluster-api", CORE_NAMESPACE, "CoreProvider", capi_version()),
        _provider(
            clusterctl.NAME, PROVIDER_NAMESPACE, "InfrastructureProvider", clusterctl.VERSION
        ),
    ]


def _provider(name: str, namespace: str, kind: str, version: str) -> Json:
    prefix = {"CoreProvider": "", "InfrastructureProvider": "infrastructure-"}[kind]
    return {
        "apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3",
        "kind": "Provider",
        "metadata": {
            "name": f"{prefix}{name}",
            "namespace": namespace,
            "labels": {CLUSTERCTL_LABEL: "", "cluster.x-k8s.io/provider": f"{prefix}{name}"},
        },
        "providerName": name,
        "type": kind,
        "version": version,
    }


def install_inventory(
    server: ApiServer, directory: Path, recorded: Iterable[Json] | None = None
) -> None:
    """The inventory CRD (cmd/clusterctl/config/manifest/clusterctl-api.yaml) and the
    providers `recorded` (default `providers()`), with their namespaces."""
    manifest = capi_module_dir() / "cmd" / "clusterctl" / "config" / "manifest"
    docs = [d for d in yaml.safe_load_all((manifest / "clusterctl-api.yaml").read_text()) if d]
    (directory / "clusterctl-api.yaml").write_text("\n---\n".join(json.dumps(d) for d in docs))
    server.install_crds(directory)
    for provider in providers() if recorded is None else recorded:
        namespace = provider["metadata"]["namespace"]
        _create(server, "/api/v1/namespaces", {"metadata": {"name": namespace}})
        _create(server, f"{INVENTORY_API}/namespaces/{namespace}/providers", provider)


def _create(server: ApiServer, collection: str, body: Json) -> None:
    try:
        server.request("POST", collection, body)
    except RequestFailed as error:
        if error.status != 409:
            raise
