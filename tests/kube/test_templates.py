"""The template CRDs on the real API server: names, labels, and an immutable spec that
still lets Cluster API's server-side-apply dry runs through.

ClusterClass and the topology controller compare a template they would write with the
stored one by applying it with `dryRun=All` (annotated `topology.cluster.x-k8s.io/dry-run`);
a template that refuses such an apply breaks every Cluster of the class, and when a
variable changed, the dry run changes the spec: the topology controller then rotates the
template (a new one under a new name). So the CRDs carry no immutability rule a dry run
could trip on; the admission webhook refuses a spec change unless it is the topology
controller's dry run (tests/kube/test_admission_webhook.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runtime.envtest import ApiServer

pytestmark = pytest.mark.kube

GROUP = "infrastructure.cluster.x-k8s.io"
OBJECTS = f"/apis/{GROUP}/v1beta1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
# The field manager and annotation Cluster API's topology controller uses for its dry runs.
TOPOLOGY = {"fieldManager": "capi-topology", "force": "true"}
DRY_RUN_ANNOTATION = "topology.cluster.x-k8s.io/dry-run"
TEMPLATES = {
    "TerraformClusterTemplate": ("terraformclustertemplates", "tfct"),
    "TerraformMachinePoolTemplate": ("terraformmachinepooltemplates", "tfmpt"),
    "TerraformMachineTemplate": ("terraformmachinetemplates", "tfmt"),
}

Obj = dict[str, Any]


def template(kind: str, name: str) -> Obj:
    """The smallest valid template of `kind`: its kind's required fields only."""
    spec: Obj = {
        "source": {"configMapRef": {"name": "module"}},
        "identityRef": {"kind": "Secret", "name": "credentials"},
        "jobs": {"image": "runner:1"},
    }
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": {"role": "worker"}}, "spec": spec}},
    }


def path(kind: str, namespace: str, name: str) -> str:
    return f"{OBJECTS}/namespaces/{namespace}/{TEMPLATES[kind][0]}/{name}"


def apply(api: ApiServer, obj: Obj, namespace: str, *, dry_run: bool = False) -> Obj:
    params = TOPOLOGY | ({"dryRun": "All"} if dry_run else {})
    target = path(obj["kind"], namespace, obj["metadata"]["name"])
    return api.request("PATCH", target, obj, APPLY, params=params)


@pytest.mark.parametrize("kind", list(TEMPLATES))
def test_template_crd_is_established_with_its_names(apiserver: ApiServer, kind: str) -> None:
    plural, short = TEMPLATES[kind]
    crd = apiserver.request("GET", f"{CRDS}/{plural}.{GROUP}")
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    names = crd["status"]["acceptedNames"]
    assert (names["kind"], names["plural"], names["shortNames"]) == (kind, plural, [short])
    assert names["categories"] == ["cluster-api", "captf"]
    assert crd["metadata"]["labels"] == {
        "cluster.x-k8s.io/v1beta2": "v1alpha1_v1beta1",
        "cluster.x-k8s.io/provider": "infrastructure-terraform",
    }
    older, version = crd["spec"]["versions"]
    assert (older["name"], older["served"], older["storage"]) == ("v1alpha1", True, False)
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    # The machine and pool templates show their scale-from-zero status; nothing else does.
    status = kind != "TerraformClusterTemplate"
    assert ("subresources" in version) == status
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Age"]


@pytest.mark.parametrize("kind", list(TEMPLATES))
def test_the_topology_controllers_dry_runs_pass_the_crd_and_store_nothing(
    apiserver: ApiServer, namespace: str, kind: str
) -> None:
    stored = apply(apiserver, template(kind, "t"), namespace)
    # The stored spec carries the CRD's defaults; the apply of the bare template merges
    # onto it, so the result is the same spec.
    assert stored["spec"]["template"]["spec"]["jobs"]["activeDeadlineSeconds"] == 3600
    again = template(kind, "t")
    again["metadata"]["annotations"] = {DRY_RUN_ANNOTATION: ""}
    dry = apply(apiserver, again, namespace, dry_run=True)
    assert dry["spec"] == stored["spec"]
    changed = copy.deepcopy(again)
    changed["spec"]["template"]["spec"]["source"] = {"image": "registry.example/module:2"}
    compared = apply(apiserver, changed, namespace, dry_run=True)
    assert compared["spec"]["template"]["spec"]["source"] == {"image": "registry.example/module:2"}
    live = apiserver.request("GET", path(kind, namespace, "t"))
    assert live["spec"] == stored["spec"]


@pytest.mark.parametrize("kind", list(TEMPLATES))
def test_metadata_of_a_template_may_change(apiserver: ApiServer, namespace: str, kind: str) -> None:
    """The ClusterClass controller adds itself as owner; the webhook keeps the spec put."""
    apply(apiserver, template(kind, "m"), namespace)
    labelled = apiserver.request(
        "PATCH", path(kind, namespace, "m"), {"metadata": {"labels": {"a": "b"}}}, MERGE
    )
    assert labelled["metadata"]["labels"] == {"a": "b"}
