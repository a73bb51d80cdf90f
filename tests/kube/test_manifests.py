"""The install manifests and example objects, checked against the real API server.

The API server is the judge of what the manifests say: CRD schemas, defaults,
CEL rules, RBAC and Pod Security are all enforced by it, so each test creates
objects and reads back what the server made of them. A few checks need no
server (file layout, the exact RBAC rules) and run with the unit tests."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.core.basics.names import CAPI_PLURALS, TEMPLATE_PLURALS
from controller.core.decide.runner_rbac import role_binding
from controller.dev.kustomize import render
from runtime.envtest import ApiServer, RequestFailed
from runtime.envtest.client import admin_ssl_context
from tests.kube.harness import install_runner_role

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
EXAMPLES = ROOT / "examples" / "objects"
GROUP = "infrastructure.cluster.x-k8s.io"
CAPTF = f"/apis/{GROUP}/v1beta1"
KINDS = {
    "TerraformCluster": "terraformclusters",
    "TerraformMachinePool": "terraformmachinepools",
    "TerraformMachine": "terraformmachines",
}
# API prefix and plural of every kind the manifests and examples hold.
RESOURCES = {
    "Namespace": ("/api/v1", "namespaces"),
    "Secret": ("/api/v1", "secrets"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "ServiceAccount": ("/api/v1", "serviceaccounts"),
    "Pod": ("/api/v1", "pods"),
    "Service": ("/api/v1", "services"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets"),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles"),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    "ValidatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
    ),
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
    ),
    **{kind: (CAPTF, plural) for kind, plural in KINDS.items()},
    **{kind: ("/apis/cluster.x-k8s.io/v1beta2", p) for kind, p in CAPI_PLURALS.items()},
}
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
}
# cert-manager's kinds: their CRDs are not installed here.
CERT_MANAGER = {"Issuer", "Certificate"}
DRY_RUN = {"dryRun": "All"}
MERGE = "application/merge-patch+json"

Obj = dict[str, Any]


def load(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def load_dir(directory: Path) -> list[Obj]:
    return [doc for path in sorted(directory.glob("*.yaml")) for doc in load(path)]


def one(docs: list[Obj], kind: str) -> Obj:
    [doc] = [d for d in docs if d["kind"] == kind]
    return doc


def collection(kind: str, namespace: str | None) -> str:
    prefix, plural = RESOURCES[kind]
    if kind in CLUSTER_SCOPED or namespace is None:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{namespace}/{plural}"


def item(kind: str, namespace: str | None, name: str) -> str:
    return f"{collection(kind, namespace)}/{name}"


def create(api: ApiServer, obj: Obj, namespace: str | None, *, dry_run: bool = False) -> Obj:
    """POST `obj` into `namespace` (default: its own; ignored for cluster-scoped kinds)."""
    body = copy.deepcopy(obj)
    namespace = namespace or obj["metadata"].get("namespace")
    if obj["kind"] not in CLUSTER_SCOPED and namespace is not None:
        body["metadata"]["namespace"] = namespace
    params = DRY_RUN if dry_run else None
    try:
        return api.request("POST", collection(obj["kind"], namespace), body, params=params)
    except RequestFailed as error:
        if not dry_run or error.status != 409:
            raise
    # Another test of the session made it (the runner's ClusterRole, a fixed name): the
    # server judges it as a replacement instead, still storing nothing.
    path = item(obj["kind"], namespace, obj["metadata"]["name"])
    body["metadata"]["resourceVersion"] = api.request("GET", path)["metadata"]["resourceVersion"]
    return api.request("PUT", path, body, params=DRY_RUN)


def rejection(call: Callable[[], object]) -> RequestFailed:
    """The error of a call the API server must refuse as invalid (422)."""
    with pytest.raises(RequestFailed) as info:
        call()
    assert info.value.status == 422, info.value
    return info.value


def minimal(kind: str, name: str = "obj") -> Obj:
    """The smallest valid object of `kind`: required fields only."""
    spec: Obj = {
        "source": {"configMapRef": {"name": "module"}},
        "identityRef": {"kind": "Secret", "name": "credentials"},
        "jobs": {"image": "runner:1"},
    }
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


# -- CRDs ---------------------------------------------------------------------


@pytest.mark.kube
@pytest.mark.parametrize(
    ("kind", "short"),
    [("TerraformCluster", "tfc"), ("TerraformMachinePool", "tfmp"), ("TerraformMachine", "tfm")],
)
def test_crd_is_established_with_its_names(apiserver: ApiServer, kind: str, short: str) -> None:
    plural = KINDS[kind]
    crd = apiserver.request(
        "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{GROUP}"
    )
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    names = crd["status"]["acceptedNames"]
    assert (names["kind"], names["plural"]) == (kind, plural)
    assert names["shortNames"] == [short]
    assert names["categories"] == ["cluster-api", "captf"]
    # Cluster API reads the contract version a CRD serves from this label; clusterctl
    # finds the provider's objects by the other.
    assert crd["metadata"]["labels"] == {
        "cluster.x-k8s.io/v1beta2": "v1alpha1_v1beta1",
        "cluster.x-k8s.io/provider": "infrastructure-terraform",
    }
    assert crd["spec"]["scope"] == "Namespaced"
    older, version = crd["spec"]["versions"]
    assert (older["name"], older["served"], older["storage"]) == ("v1alpha1", True, False)
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    assert version["subresources"] == older["subresources"] == {"status": {}}


# The status fields of one kind's contract write-back; `initialization` is shared.
POOL_SPEC = ("capacity", "nodeInfo")
POOL_STATUS = ("capacity", "nodeInfo", "capacitySource")
CONTRACT_STATUS = (
    "instances",
    "failureDomains",
    "addresses",
    "failureDomain",
    "interruptible",
    "replicas",
    "ready",
)


def test_three_kinds_share_one_spec_schema() -> None:
    """The kinds differ only in the machine's immutability rules (and the members' Cluster
    column); everything else is written three times and must agree."""
    specs = {}
    for kind, plural in KINDS.items():
        [crd] = load(MANIFESTS / "crds" / f"{GROUP}_{plural}.yaml")
        # The v1alpha1 schemas, as written; v1beta1's are made from them (crd_versions.py).
        version = crd["spec"]["versions"][0]
        schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
        spec = schema["properties"]["spec"]
        spec.pop("description")
        spec.pop("x-kubernetes-validations", None)
        if kind == "TerraformMachine":
            for field in ("variables", "variablesFrom"):
                spec["properties"][field].pop("x-kubernetes-validations")
            # The machine's source rules: the two every kind has, then immutability.
            rules = spec["properties"]["source"]["x-kubernetes-validations"]
            spec["properties"]["source"]["x-kubernetes-validations"] = rules[:2]
        # What each kind writes back to Cluster API is its own (the module contract).
        for field in ("controlPlaneEndpoint", "providerID", "providerIDList"):
            spec["properties"].pop(field, None)
        # Only a machine's health is watched, only a pool's members re-read (issue 30); a
        # cluster's health holds only what its machines inherit (issue 37: the threshold).
        assert ("health" in spec["properties"]) == (kind != "TerraformMachinePool")
        if kind == "TerraformCluster":
            assert set(spec["properties"]["health"]["properties"]) == {"unhealthyThreshold"}
        assert ("membership" in spec["properties"]) == (kind == "TerraformMachinePool")
        spec["properties"].pop("health", None)
        spec["properties"].pop("membership", None)
        status = schema["properties"]["status"]["properties"]
        for field in CONTRACT_STATUS:
            status.pop(field, None)
        # Only a pool is read by the cluster-autoscaler itself (a MachinePool's
        # infrastructureRef names it, not a template): scale from zero (issue 30).
        for field, where in (
            *((f, spec["properties"]) for f in POOL_SPEC),
            *((f, status) for f in POOL_STATUS),
        ):
            assert (field in where) == (kind == "TerraformMachinePool"), (kind, field)
            where.pop(field, None)
        # A cluster's deletionPolicy defaults to Delete; a member's has no default, so an
        # absent one takes its cluster's (docs/deletion.md).
        deletion = spec["properties"]["deletionPolicy"]
        deletion.pop("description")
        assert deletion.pop("default", None) == ("Delete" if kind == "TerraformCluster" else None)
        columns = [c for c in version["additionalPrinterColumns"] if c["name"] != "Cluster"]
        specs[kind] = (spec, schema["properties"]["status"], columns)
    cluster, pool, machine = specs.values()
    assert cluster == pool
    assert cluster == machine


def without_transition_rules(schema: Any) -> Any:
    """`schema` without the CEL rules that read oldSelf (and validation lists left empty)."""
    if isinstance(schema, list):
        return [without_transition_rules(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: without_transition_rules(v) for k, v in schema.items()}
    rules = [r for r in out.get("x-kubernetes-validations", []) if "oldSelf" not in r["rule"]]
    if rules:
        out["x-kubernetes-validations"] = rules
    else:
        out.pop("x-kubernetes-validations", None)
    return out


def test_templates_carry_their_kinds_spec_schema() -> None:
    """A <Kind>Template's spec.template.spec is its kind's spec schema, copied whole but
    for the transition rules: a template's immutability is the webhook's, which lets the
    topology controller's dry runs through (docs/api.md, "Templates")."""
    for kind, plural in KINDS.items():
        [crd] = load(MANIFESTS / "crds" / f"{GROUP}_{plural}.yaml")
        [template] = load(MANIFESTS / "crds" / f"{GROUP}_{kind.lower()}templates.yaml")
        assert template["spec"]["names"]["kind"] == f"{kind}Template"
        pairs = zip(crd["spec"]["versions"], template["spec"]["versions"], strict=True)
        for version, template_version in pairs:
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            outer = template_version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            copied = outer["properties"]["template"]["properties"]["spec"]
            assert copied == without_transition_rules(spec), (kind, version["name"])
        assert without_transition_rules(template) == template, f"{kind}Template reads oldSelf"
        assert template["metadata"]["labels"] == crd["metadata"]["labels"]


# -- examples and defaults -----------------------------------------------------


@pytest.mark.kube
def test_examples_are_accepted_and_consistent(apiserver: ApiServer, namespace: str) -> None:
    docs = load_dir(EXAMPLES)
    for doc in docs:
        create(apiserver, doc, namespace)
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {d["kind"] for d in docs} >= set(KINDS)
    for obj in (d for d in docs if d["kind"] in KINDS):
        kind = obj["kind"]
        stored = apiserver.request("GET", item(kind, namespace, obj["metadata"]["name"]))
        spec = stored["spec"]
        # Every object the examples refer to is among the examples.
        assert ("ConfigMap", spec["source"]["configMapRef"]["name"]) in names
        assert ("Secret", spec["identityRef"]["name"]) in names
        for source in spec.get("variablesFrom", []):
            # Or a Secret another example writes: a cluster's outputs.
            written = {
                ("Secret", d["spec"]["outputs"]["secretName"])
                for d in docs
                if "outputs" in d.get("spec", {})
            }
            assert ("Secret", source["secretRef"]["name"]) in names | written
        for dep in spec.get("dependsOn", []):
            assert (dep["kind"], dep["name"]) in names
        # Owners: a member's Cluster (by its label) is among the examples' Clusters.
        cluster = (stored["metadata"].get("labels") or {}).get("cluster.x-k8s.io/cluster-name")
        if kind != "TerraformCluster":
            assert ("Cluster", cluster) in names


@pytest.mark.kube
def test_the_cluster_api_examples_take_their_modules_from_images(
    apiserver: ApiServer, namespace: str
) -> None:
    """examples/clusterapi's CAPTF objects, as `kubectl apply` by hand sends them (make run
    replaces the example registry with its own)."""
    resources = {**RESOURCES, "TerraformMachineTemplate": (CAPTF, "terraformmachinetemplates")}
    found = {}
    for doc in load_dir(ROOT / "examples" / "clusterapi"):
        if doc["kind"] not in resources or not doc["kind"].startswith("Terraform"):
            continue
        prefix, plural = resources[doc["kind"]]
        body = copy.deepcopy(doc) | {"metadata": doc["metadata"] | {"namespace": namespace}}
        stored = apiserver.request(
            "POST", f"{prefix}/namespaces/{namespace}/{plural}", body, params=DRY_RUN
        )
        spec = stored["spec"]
        source = (spec.get("template") or {}).get("spec", spec)["source"]
        found[stored["metadata"]["name"]] = source["image"]
        assert source["imagePullPolicy"] == "IfNotPresent"
    assert found == {
        "demo": "localhost:5000/captf-examples/cluster:v1",
        "demo-md-0": "localhost:5000/captf-examples/machine:v1",
        "demo-mp-0": "localhost:5000/captf-examples/machinepool:v1",
        "flaky": "localhost:5000/captf-examples/flaky:v1",
    }


def test_example_modules_use_only_terraform_data() -> None:
    modules = [d for d in load_dir(EXAMPLES) if d["kind"] == "ConfigMap"]
    assert modules
    for module in modules:
        source = "\n".join(module["data"].values())
        assert set(re.findall(r'^\s*resource\s+"([^"]+)"', source, re.M)) == {"terraform_data"}
        assert not re.search(r"^\s*(provider|data)\s+\"", source, re.M)
        assert "required_providers" not in source


JOB_DEFAULTS = {
    "activeDeadlineSeconds": 3600,
    "failedJobsHistoryLimit": 3,
    "successfulJobsHistoryLimit": 1,
}


@pytest.mark.kube
@pytest.mark.parametrize("kind", list(KINDS))
def test_defaults_are_applied(apiserver: ApiServer, namespace: str, kind: str) -> None:
    obj = minimal(kind)
    obj["spec"]["changeWindows"] = [{"start": "22:00", "duration": "4h"}]
    spec = create(apiserver, obj, namespace)["spec"]
    assert spec["jobs"] == {"image": "runner:1", **JOB_DEFAULTS}
    assert spec["approval"] == {"mode": "Auto"}
    assert spec["guard"] == {"allowDestructive": False}
    assert spec["drift"] == {"remediate": False}
    assert "refresh" not in spec
    assert spec["changeWindows"] == [{"start": "22:00", "duration": "4h", "timeZone": "UTC"}]


@pytest.mark.kube
def test_given_values_are_kept_over_defaults(apiserver: ApiServer, namespace: str) -> None:
    obj = minimal("TerraformCluster")
    given = {
        "image": "r:2",
        "activeDeadlineSeconds": 60,
        "failedJobsHistoryLimit": 0,
        "successfulJobsHistoryLimit": 0,
    }
    obj["spec"] |= {
        "jobs": given,
        "approval": {"mode": "Manual"},
        "drift": {"interval": "1h30m", "remediate": True},
    }
    spec = create(apiserver, obj, namespace)["spec"]
    assert spec["jobs"] == given
    assert spec["approval"] == {"mode": "Manual"}
    assert spec["drift"] == {"interval": "1h30m", "remediate": True}


# -- validation ------------------------------------------------------------------


def _set(path: str, value: object) -> Callable[[Obj], None]:
    """An edit of the spec: `path` is dotted; a value of ... deletes the field."""

    def edit(spec: Obj) -> None:
        *parents, leaf = path.split(".")
        for key in parents:
            spec = spec.setdefault(key, {})
        if value is ...:
            del spec[leaf]
        else:
            spec[leaf] = value

    return edit


INVALID = {
    "drift interval not a duration": (_set("drift.interval", "5 minutes"), "spec.drift.interval"),
    # A zero drift interval turns the checks off (issue 30: they are on by default).
    "drift interval of 1ns": (_set("drift.interval", "1ns"), "interval must be 0 or at least 1m"),
    "drift interval just short": (
        _set("drift.interval", "59.9s"),
        "interval must be 0 or at least 1m",
    ),
    "refresh interval of 1ms": (_set("refresh.interval", "1ms"), "interval must be at least 1m"),
    "refresh interval with a unit Go lacks": (
        _set("refresh.interval", "1d"),
        "spec.refresh.interval",
    ),
    "window start without leading zero": (
        _set("changeWindows", [{"start": "9:00", "duration": "1h"}]),
        "spec.changeWindows[0].start",
    ),
    "window start past midnight": (
        _set("changeWindows", [{"start": "24:00", "duration": "1h"}]),
        "spec.changeWindows[0].start",
    ),
    "window duration not a duration": (
        _set("changeWindows", [{"start": "09:00", "duration": "8 hours"}]),
        "spec.changeWindows[0].duration",
    ),
    "window longer than a week": (
        _set("changeWindows", [{"start": "09:00", "duration": "169h"}]),
        "at most 168h",
    ),
    "window without start": (
        _set("changeWindows", [{"duration": "1h"}]),
        "spec.changeWindows[0].start",
    ),
    "window on an unknown day": (
        _set("changeWindows", [{"days": ["Monday"], "start": "09:00", "duration": "1h"}]),
        "spec.changeWindows[0].days[0]",
    ),
    "negative failed history limit": (
        _set("jobs.failedJobsHistoryLimit", -1),
        "spec.jobs.failedJobsHistoryLimit",
    ),
    "negative successful history limit": (
        _set("jobs.successfulJobsHistoryLimit", -1),
        "spec.jobs.successfulJobsHistoryLimit",
    ),
    "zero deadline": (_set("jobs.activeDeadlineSeconds", 0), "spec.jobs.activeDeadlineSeconds"),
    "deadline under a minute": (
        _set("jobs.activeDeadlineSeconds", 59),
        "spec.jobs.activeDeadlineSeconds: Invalid value: 59",
    ),
    "no runner image": (_set("jobs.image", ...), "spec.jobs.image: Required value"),
    "no jobs": (_set("jobs", ...), "spec.jobs: Required value"),
    "dependsOn an unknown kind": (
        _set("dependsOn", [{"kind": "Deployment", "name": "x"}]),
        "spec.dependsOn[0].kind",
    ),
    "dependsOn twice the same object": (
        _set("dependsOn", [{"kind": "TerraformCluster", "name": "x"}] * 2),
        "spec.dependsOn[1]: Duplicate value",
    ),
    "source naming neither configMapRef nor image": (
        _set("source", {}),
        "spec.source: Invalid value: spec.source names exactly one of configMapRef and image",
    ),
    "source naming both configMapRef and image": (
        _set("source", {"configMapRef": {"name": "module"}, "image": "registry.local/m:1"}),
        "spec.source: Invalid value: spec.source names exactly one of configMapRef and image",
    ),
    "pull policy without an image": (
        _set("source", {"configMapRef": {"name": "module"}, "imagePullPolicy": "Always"}),
        "spec.source.imagePullPolicy needs spec.source.image",
    ),
    "unknown image pull policy": (
        _set("source", {"image": "registry.local/m:1", "imagePullPolicy": "Sometimes"}),
        "spec.source.imagePullPolicy",
    ),
    "configMapRef without name": (
        _set("source", {"configMapRef": {}}),
        "spec.source.configMapRef.name: Required value",
    ),
    "no credentials": (
        _set("identityRef", ...),
        "spec.identityRef is required",
    ),
    "an identity of another kind": (
        _set("identityRef", {"kind": "ConfigMap", "name": "aws"}),
        "spec.identityRef.kind: Unsupported value",
    ),
    "unknown approval mode": (_set("approval.mode", "auto"), "spec.approval.mode"),
    "runner account not a name": (
        _set("jobs.serviceAccountName", "Runner_1"),
        "spec.jobs.serviceAccountName",
    ),
    "variables not an object": (_set("variables", ["a"]), "spec.variables"),
}


@pytest.mark.kube
@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_objects_are_rejected(apiserver: ApiServer, namespace: str, case: str) -> None:
    edit, expected = INVALID[case]
    obj = minimal("TerraformCluster")
    edit(obj["spec"])
    error = rejection(lambda: create(apiserver, obj, namespace))
    assert expected in error.message


@pytest.mark.kube
@pytest.mark.parametrize("kind", list(KINDS))
def test_an_image_source_is_accepted_on_every_kind(
    apiserver: ApiServer, namespace: str, kind: str
) -> None:
    obj = minimal(kind)
    source = {"image": "registry.local/modules/cluster:1", "imagePullPolicy": "Always"}
    obj["spec"]["source"] = source
    assert create(apiserver, obj, namespace)["spec"]["source"] == source


@pytest.mark.kube
@pytest.mark.parametrize("kind", ["TerraformMachinePool", "TerraformMachine"])
def test_members_need_no_cluster_in_their_spec(
    apiserver: ApiServer, namespace: str, kind: str
) -> None:
    # Which cluster a member belongs to is Cluster API's to say (owner and label); the
    # spec no longer names one, and a clusterRef is pruned as an unknown field.
    obj = minimal(kind)
    obj["spec"]["clusterRef"] = {"name": "cluster"}
    stored = create(apiserver, obj, namespace, dry_run=True)
    assert "clusterRef" not in stored["spec"]


@pytest.mark.kube
@pytest.mark.parametrize("kind", ["TerraformMachinePool", "TerraformMachine"])
def test_members_may_name_no_credentials_and_inherit_their_cluster_s(
    apiserver: ApiServer, namespace: str, kind: str
) -> None:
    obj = minimal(kind)
    del obj["spec"]["identityRef"]
    assert "identityRef" not in create(apiserver, obj, namespace, dry_run=True)["spec"]


@pytest.mark.kube
def test_an_identity_ref_names_an_identity_unless_it_says_secret(
    apiserver: ApiServer, namespace: str
) -> None:
    obj = minimal("TerraformCluster")
    del obj["spec"]["identityRef"]
    obj["spec"]["identityRef"] = {"name": "aws"}
    stored = create(apiserver, obj, namespace, dry_run=True)
    assert stored["spec"]["identityRef"] == {"kind": "TerraformClusterIdentity", "name": "aws"}


IDENTITIES = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/terraformclusteridentities"


def _identity(allowed: Obj | None, name: str = "id") -> Obj:
    spec: Obj = {"secretRef": {"namespace": "captf-system", "name": "aws"}}
    if allowed is not None:
        spec["allowedNamespaces"] = allowed
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformClusterIdentity",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.mark.kube
@pytest.mark.parametrize(
    "allowed", [None, {"list": ["a"]}, {"selector": {}}, {"list": ["a"], "selector": {}}]
)
def test_identities_are_cluster_scoped_and_accept_a_list_and_a_selector(
    apiserver: ApiServer, allowed: Obj | None
) -> None:
    stored = apiserver.request("POST", IDENTITIES, _identity(allowed), params=DRY_RUN)
    assert "namespace" not in stored["metadata"]


@pytest.mark.kube
@pytest.mark.parametrize(
    ("identity", "expected"),
    [
        (_identity({}), "set list, selector or both"),
        (_identity({"list": []}, name="n" * 242), "at most 241 characters"),
        (
            _identity({"selector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}),
            "Unsupported value",
        ),
    ],
)
def test_identities_refuse_what_is_ambiguous_or_too_long(
    apiserver: ApiServer, identity: Obj, expected: str
) -> None:
    error = rejection(lambda: apiserver.request("POST", IDENTITIES, identity, params=DRY_RUN))
    assert expected in error.message


@pytest.mark.kube
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_takes_an_identity_ref(apiserver: ApiServer, namespace: str, kind: str) -> None:
    obj = minimal(kind)
    del obj["spec"]["identityRef"]
    obj["spec"]["identityRef"] = {"kind": "TerraformClusterIdentity", "name": "aws"}
    stored = create(apiserver, obj, namespace, dry_run=True)
    assert stored["spec"]["identityRef"] == {"kind": "TerraformClusterIdentity", "name": "aws"}


@pytest.mark.kube
@pytest.mark.parametrize(
    "interval",
    ["90s", "1h30m", "1.5h", ".5h", "1.h", "60000ms", "2h45m30.5s", "60000000µs", "60000000us", ""],
)
def test_go_durations_are_accepted(apiserver: ApiServer, namespace: str, interval: str) -> None:
    obj = minimal("TerraformCluster")
    obj["spec"]["drift"] = {"interval": interval}
    assert create(apiserver, obj, namespace, dry_run=True)["spec"]["drift"]["interval"] == interval


# -- immutability of a machine's inputs ---------------------------------------------


def _machine_with_inputs() -> Obj:
    obj = minimal("TerraformMachine", "m")
    obj["spec"]["variables"] = {"name": "m", "size": 2, "tags": {"a": "b"}}
    obj["spec"]["variablesFrom"] = [{"secretRef": {"name": "vars", "key": "token"}}]
    return obj


INPUT_CHANGES: dict[str, Obj] = {
    "another module": {"source": {"configMapRef": {"name": "other"}}},
    "a changed variable": {"variables": {"size": 3}},
    "a nested change": {"variables": {"tags": {"a": "c"}}},
    "an added variable": {"variables": {"extra": True}},
    "variables removed": {"variables": None},
    "another variables Secret": {"variablesFrom": [{"secretRef": {"name": "vars2"}}]},
    "variablesFrom removed": {"variablesFrom": None},
}


def _patch(api: ApiServer, kind: str, namespace: str, name: str, spec: Obj) -> Obj:
    return api.request("PATCH", item(kind, namespace, name), {"spec": spec}, MERGE)


@pytest.mark.kube
@pytest.mark.parametrize("change", list(INPUT_CHANGES))
def test_machine_inputs_cannot_change(apiserver: ApiServer, namespace: str, change: str) -> None:
    create(apiserver, _machine_with_inputs(), namespace)
    field = next(iter(INPUT_CHANGES[change]))
    error = rejection(
        lambda: _patch(apiserver, "TerraformMachine", namespace, "m", INPUT_CHANGES[change])
    )
    assert f"spec.{field} is immutable" in error.message


@pytest.mark.kube
@pytest.mark.parametrize("field", ["variables", "variablesFrom"])
def test_machine_inputs_cannot_be_added_later(
    apiserver: ApiServer, namespace: str, field: str
) -> None:
    create(apiserver, minimal("TerraformMachine", "m"), namespace)
    added = {"variables": {"a": 1}, "variablesFrom": [{"secretRef": {"name": "s"}}]}[field]
    error = rejection(lambda: _patch(apiserver, "TerraformMachine", namespace, "m", {field: added}))
    assert f"spec.{field} is immutable" in error.message


OTHER_CHANGES: Obj = {
    "jobs": {"image": "runner:2", "failedJobsHistoryLimit": 5},
    "drift": {"interval": "10m", "remediate": True},
    "approval": {"mode": "Manual"},
    "changeWindows": [{"days": ["Sat", "Sun"], "start": "02:00", "duration": "3h"}],
}


@pytest.mark.kube
def test_machine_other_fields_can_change(apiserver: ApiServer, namespace: str) -> None:
    created = create(apiserver, _machine_with_inputs(), namespace)
    # Rewriting the inputs with equal values is no change, so it passes the rules.
    same = {k: created["spec"][k] for k in ("source", "variables", "variablesFrom")}
    spec = _patch(apiserver, "TerraformMachine", namespace, "m", {**OTHER_CHANGES, **same})["spec"]
    assert spec["jobs"]["image"] == "runner:2"
    assert spec["jobs"]["failedJobsHistoryLimit"] == 5
    assert spec["drift"] == {"interval": "10m", "remediate": True}
    assert spec["approval"] == {"mode": "Manual"}
    assert spec["changeWindows"][0]["days"] == ["Sat", "Sun"]
    assert spec["variables"] == created["spec"]["variables"]


@pytest.mark.kube
@pytest.mark.parametrize("kind", ["TerraformCluster", "TerraformMachinePool"])
def test_cluster_and_pool_inputs_can_change(
    apiserver: ApiServer, namespace: str, kind: str
) -> None:
    obj = minimal(kind, "o")
    obj["spec"]["variables"] = {"size": 2}
    create(apiserver, obj, namespace)
    changed = {
        "source": {"configMapRef": {"name": "other"}},
        "variables": {"size": 3},
        "variablesFrom": [{"secretRef": {"name": "vars"}}],
    }
    spec = _patch(apiserver, kind, namespace, "o", changed)["spec"]
    assert {k: spec[k] for k in changed} == changed
    spec = _patch(apiserver, kind, namespace, "o", {"variables": None, "variablesFrom": None})[
        "spec"
    ]
    assert "variables" not in spec
    assert "variablesFrom" not in spec


# -- status ----------------------------------------------------------------------------


def _status(at: str) -> Obj:
    return {
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "InputsChangedBackoff",
                "message": "apply failed 1 time; retrying",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
        "activeJob": "",
        "inputsHash": "a" * 64,
        "appliedInputsHash": "b" * 64,
        "stateSerial": 7,
        "lastRestoredSerial": 5,
        "next": {"op": "apply", "reason": "InputsChangedBackoff", "at": at},
        "failures": {"apply": {"count": 1, "lastFailedAt": "2026-01-01T00:00:00Z"}},
        "missedWindow": {
            "op": "apply",
            "opens": "2026-01-01T09:00:00Z",
            "closes": "2026-01-01T10:00:00Z",
        },
    }


@pytest.mark.kube
@pytest.mark.parametrize("kind", list(KINDS))
def test_status_is_written_through_its_subresource(
    apiserver: ApiServer, namespace: str, kind: str
) -> None:
    path = item(kind, namespace, "s")
    created = create(apiserver, minimal(kind, "s"), namespace)
    status = _status("2026-01-01T00:01:00Z")
    # The status subresource ignores spec; the main resource ignores status.
    body = {"status": status, "spec": {"jobs": {"image": "ignored:1"}}}
    written = apiserver.request("PATCH", f"{path}/status", body, MERGE)
    assert written["status"] == status
    assert written["spec"] == created["spec"]
    assert written["metadata"]["generation"] == created["metadata"]["generation"]
    updated = apiserver.request("PATCH", path, {"status": {"stateSerial": 99}}, MERGE)
    assert updated["status"]["stateSerial"] == 7
    changed = _patch(apiserver, kind, namespace, "s", {"jobs": {"image": "runner:2"}})
    assert changed["metadata"]["generation"] == created["metadata"]["generation"] + 1


@pytest.mark.kube
def test_malformed_conditions_are_rejected(apiserver: ApiServer, namespace: str) -> None:
    path = item("TerraformCluster", namespace, "s")
    create(apiserver, minimal("TerraformCluster", "s"), namespace)
    bad = {"type": "Ready", "status": "Yes"}
    error = rejection(
        lambda: apiserver.request(
            "PATCH", f"{path}/status", {"status": {"conditions": [bad]}}, MERGE
        )
    )
    assert "status.conditions[0].status" in error.message
    assert "status.conditions[0].reason: Required value" in error.message


def _table(api: ApiServer, path: str) -> Obj:
    """GET `path` as the server-side Table that kubectl prints."""
    request = urllib.request.Request(api.url + path)
    request.add_header("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
    with urllib.request.urlopen(request, context=admin_ssl_context(api.pki), timeout=30) as resp:
        table: Obj = json.load(resp)
    return table


@pytest.mark.kube
def test_printer_columns_show_what_the_object_waits_for(
    apiserver: ApiServer, namespace: str
) -> None:
    path = item("TerraformMachine", namespace, "p")
    create(apiserver, minimal("TerraformMachine", "p"), namespace)
    at = "2099-01-01T00:01:00Z"
    image = {"reference": "registry.example/m/machine:1", "digest": "sha256:" + "a" * 64}
    status = _status(at) | {"image": image}
    apiserver.request("PATCH", f"{path}/status", {"status": status}, MERGE)
    table = _table(apiserver, path)
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:7] == ["Name", "Cluster", "Ready", "Op", "Waiting", "Retry at", "Active job"]
    assert names[-1] == "Age"
    cells = dict(zip(names, table["rows"][0]["cells"], strict=True))
    # A future time stays readable: a `date` column would print it as "<invalid>".
    assert (cells["Ready"], cells["Op"], cells["Waiting"], cells["Retry at"]) == (
        "False",
        "apply",
        "InputsChangedBackoff",
        at,
    )
    # The module image and the digest the newest Job ran: what `kubectl get` shows pinned.
    assert (cells["Image"], cells["Digest"]) == (image["reference"], image["digest"])


# -- RBAC ---------------------------------------------------------------------------------

# Every (API group, resource, verb) the controller uses; the ClusterRole grants these exactly.
# What tests/kube/test_rbac_audit.py measured the controller to use.
CONTROLLER_PERMISSIONS = (
    {
        (GROUP, plural, verb)
        for plural in KINDS.values()
        for verb in ("get", "list", "watch", "patch")
    }
    | {(GROUP, f"{plural}/status", "patch") for plural in KINDS.values()}
    | {(GROUP, f"{plural}/finalizers", "update") for plural in KINDS.values()}
    # TerraformPlans: made, pruned, their status written; never their spec.
    | {(GROUP, "terraformplans", verb) for verb in ("list", "watch", "create", "delete")}
    | {(GROUP, "terraformplans/status", "patch")}
    # TerraformPolicies: watched, never written.
    | {(GROUP, "terraformpolicies", verb) for verb in ("list", "watch")}
    | {("batch", "jobs", verb) for verb in ("get", "list", "watch", "create", "delete", "patch")}
    # A finished Job's pods, for the runner's result in the termination message; the
    # Pending ones watched, and the FailedCreate Events, for a Job that cannot start.
    | {("", "pods", "list"), ("", "pods", "watch")}
    | {("", "events", "list"), ("", "events", "watch")}
    | {("", "secrets", verb) for verb in ("get", "list", "watch", "create", "patch", "delete")}
    # Identities: watched, held by a finalizer, their status written; Namespaces watched.
    | {(GROUP, "terraformclusteridentities", verb) for verb in ("list", "watch", "patch")}
    | {(GROUP, "terraformclusteridentities/status", "patch")}
    | {("", "namespaces", verb) for verb in ("list", "watch")}
    # Templates: watched, their scale-from-zero status written; never their spec.
    | {(GROUP, p, verb) for p in TEMPLATE_PLURALS.values() for verb in ("list", "watch")}
    | {(GROUP, f"{p}/status", "patch") for p in TEMPLATE_PLURALS.values()}
    | {("", "configmaps", verb) for verb in ("get", "list", "watch")}
    # The runner ServiceAccount's imagePullSecrets, before a module image's lookup.
    | {("", "serviceaccounts", "get")}
    | {
        ("coordination.k8s.io", "leases", verb)
        for verb in ("get", "list", "watch", "create", "update")
    }
    | {("", "events", "create")}
    # Cluster API's owners: watched; a Machine patched only for its remediation mark.
    | {
        ("cluster.x-k8s.io", plural, verb)
        for plural in CAPI_PLURALS.values()
        for verb in ("list", "watch")
    }
    | {("cluster.x-k8s.io", "machines", "patch"), ("cluster.x-k8s.io", "machinepools", "patch")}
    | {("authentication.k8s.io", "tokenreviews", "create")}
    | {("authorization.k8s.io", "subjectaccessreviews", "create")}
    # The runner's identity in the objects' namespaces, and `bind` on its ClusterRole.
    | {("", "serviceaccounts", verb) for verb in ("list", "watch", "create", "patch", "delete")}
    | {
        ("rbac.authorization.k8s.io", "rolebindings", verb)
        for verb in ("get", "list", "watch", "create", "delete")
    }
    | {("rbac.authorization.k8s.io", "clusterroles", "bind")}
    # The storage version migration: the group's CRDs read and their storedVersions
    # trimmed; the cluster templates listed and rewritten (no status to write through).
    | {("apiextensions.k8s.io", "customresourcedefinitions", "get")}
    | {("apiextensions.k8s.io", "customresourcedefinitions/status", "patch")}
    | {(GROUP, "terraformclustertemplates", verb) for verb in ("list", "patch")}
    | {(GROUP, "terraformpolicies", "patch")}
)
# The grants limited to named objects: binding the runner's ClusterRole, no other; the
# migration's CRDs, no other.
_OUR_CRDS = sorted(f"{p.stem.split('_')[1]}.{GROUP}" for p in (MANIFESTS / "crds").glob("*.yaml"))
NAMED_GRANTS = {
    ("rbac.authorization.k8s.io", "clusterroles", "bind"): ["captf-runner"],
    ("apiextensions.k8s.io", "customresourcedefinitions", "get"): _OUR_CRDS,
    ("apiextensions.k8s.io", "customresourcedefinitions/status", "patch"): _OUR_CRDS,
}


def _grants(role: Obj) -> set[tuple[str, str, str]]:
    grants = set()
    for rule in role["rules"]:
        assert set(rule) - {"resourceNames"} == {"apiGroups", "resources", "verbs"}, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                found = {(group, resource, verb) for verb in rule["verbs"]}
                for grant in found:
                    names = rule.get("resourceNames")
                    assert (sorted(names) if names else None) == NAMED_GRANTS.get(grant), rule
                grants |= found
    return grants


def test_cluster_role_grants_exactly_what_the_controller_uses() -> None:
    grants = _grants(one(load(MANIFESTS / "rbac.yaml"), "ClusterRole"))
    assert not any("*" in part for grant in grants for part in grant)
    assert grants - CONTROLLER_PERMISSIONS == set(), "grants the controller does not need"
    assert CONTROLLER_PERMISSIONS - grants == set(), "missing grants"


@pytest.fixture
def rbac_docs(namespace: str) -> list[Obj]:
    """rbac.yaml moved into the test's namespace, cluster-scoped names made unique."""
    docs = load(MANIFESTS / "rbac.yaml")
    for doc in docs:
        if doc["kind"] in CLUSTER_SCOPED:
            doc["metadata"]["name"] = f"{doc['metadata']['name']}-{namespace}"
        else:
            doc["metadata"]["namespace"] = namespace
        if "roleRef" in doc and doc["roleRef"]["kind"] == "ClusterRole":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{namespace}"
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
    return docs


def _allowed(
    api: ApiServer,
    sa: str,
    namespace: str,
    group: str,
    resource: str,
    verb: str,
    *,
    name: str = "",
) -> bool:
    resource, _, subresource = resource.partition("/")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{namespace}:{sa}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
            "resourceAttributes": {
                "namespace": namespace,
                "group": group,
                "resource": resource,
                "subresource": subresource,
                "verb": verb,
                "name": name,
            },
        },
    }
    answer = api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


@pytest.fixture
def applied_rbac(apiserver: ApiServer, namespace: str, rbac_docs: list[Obj]) -> Iterator[None]:
    for doc in rbac_docs:
        create(apiserver, doc, namespace)
    yield
    for doc in rbac_docs:
        if doc["kind"] in CLUSTER_SCOPED:
            apiserver.request("DELETE", item(doc["kind"], None, doc["metadata"]["name"]))


NOT_GRANTED = [
    ("", "secrets", "update"),
    (GROUP, "terraformclusters", "update"),
    ("coordination.k8s.io", "leases", "delete"),
    ("", "configmaps", "create"),
    ("", "configmaps", "update"),
    ("", "pods", "get"),
    ("", "pods", "patch"),
    ("", "pods/status", "patch"),
    ("batch", "jobs", "update"),
    ("batch", "jobs/status", "patch"),
    (GROUP, "terraformclusters", "create"),
    (GROUP, "terraformmachines", "delete"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "get"),
    ("rbac.authorization.k8s.io", "roles", "create"),
    ("rbac.authorization.k8s.io", "clusterroles", "escalate"),
    ("rbac.authorization.k8s.io", "rolebindings", "update"),
    ("rbac.authorization.k8s.io", "rolebindings", "patch"),
    ("", "serviceaccounts/token", "create"),
]


@pytest.mark.kube
@pytest.mark.usefixtures("applied_rbac")
def test_controller_service_account_can_do_its_work_and_no_more(
    apiserver: ApiServer, namespace: str
) -> None:
    def allowed(group: str, resource: str, verb: str) -> bool:
        return _allowed(apiserver, "captf-controller", namespace, group, resource, verb)

    named = set(NAMED_GRANTS)
    assert {g for g in CONTROLLER_PERMISSIONS - named if not allowed(*g)} == set()
    assert {g for g in NOT_GRANTED if allowed(*g)} == set()
    bind = ("rbac.authorization.k8s.io", "clusterroles", "bind")
    # `bind` names the runner's ClusterRole: binding admin or edit stays an escalation.
    assert _allowed(apiserver, "captf-controller", namespace, *bind, name="captf-runner")
    for other in ("admin", "edit", "cluster-admin"):
        assert not _allowed(apiserver, "captf-controller", namespace, *bind, name=other)


@pytest.mark.kube
def test_runner_role_lets_the_runner_write_state_and_touch_no_job(
    apiserver: ApiServer, namespace: str
) -> None:
    """The ClusterRole of the manifests, bound as the controller binds it (the binding the
    core builds), grants the runner its Secrets in that namespace and nothing on Jobs."""
    install_runner_role(apiserver)
    create(apiserver, role_binding(namespace), namespace)

    def allowed(group: str, resource: str, verb: str) -> bool:
        return _allowed(apiserver, "captf-runner", namespace, group, resource, verb)

    granted = [
        ("", "secrets", verb) for verb in ("get", "list", "create", "update", "patch", "delete")
    ]
    # No verb at all on Jobs: a module could otherwise rewrite any Job's result.
    job_verbs = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
    denied = [("batch", "jobs", verb) for verb in job_verbs] + [
        ("batch", "jobs/status", "patch"),
        ("", "secrets", "watch"),
        ("", "configmaps", "get"),
        ("", "pods", "get"),
        (GROUP, "terraformclusters", "get"),
    ]
    assert [g for g in granted if not allowed(*g)] == []
    assert [g for g in denied if allowed(*g)] == []
    # Bound in this namespace only: another namespace's Secrets stay out of reach.
    assert not _allowed_in(apiserver, "captf-runner", namespace, "default", "", "secrets", "get")


def _allowed_in(
    api: ApiServer, sa: str, sa_namespace: str, namespace: str, group: str, resource: str, verb: str
) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{sa_namespace}:{sa}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{sa_namespace}"],
            "resourceAttributes": {
                "namespace": namespace,
                "group": group,
                "resource": resource,
                "verb": verb,
            },
        },
    }
    answer = api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


# -- Deployment and the install as a whole -------------------------------------------


@pytest.mark.kube
def test_install_manifests_are_accepted(apiserver: ApiServer) -> None:
    """Dry runs: the install's names are fixed and the API server is shared by the session.

    The namespace's own dry run creates nothing, so everything else goes to a
    namespace that exists."""
    docs = [*load(MANIFESTS / "namespace.yaml"), *load(MANIFESTS / "rbac.yaml")]
    docs += load(MANIFESTS / "pdb.yaml")
    for doc in docs:
        if doc["kind"] == "Namespace" and _exists(apiserver, doc["metadata"]["name"]):
            continue  # another test of the session installed it already; nothing to check
        create(apiserver, doc, None if doc["kind"] == "Namespace" else "default", dry_run=True)


def _exists(api: ApiServer, namespace: str) -> bool:
    names = {n["metadata"]["name"] for n in api.request("GET", "/api/v1/namespaces")["items"]}
    return namespace in names


def _restricted_namespace(api: ApiServer, namespace: str) -> None:
    labels = one(load(MANIFESTS / "namespace.yaml"), "Namespace")["metadata"]["labels"]
    api.request(
        "PATCH", item("Namespace", None, namespace), {"metadata": {"labels": labels}}, MERGE
    )


def _pod(template: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "controller"},
        "spec": template["spec"],
    }


@pytest.mark.kube
def test_deployment_is_accepted_under_restricted_pod_security(
    apiserver: ApiServer, namespace: str
) -> None:
    _restricted_namespace(apiserver, namespace)
    deployment = one(load(MANIFESTS / "deployment.yaml"), "Deployment")
    created = create(apiserver, deployment, namespace, dry_run=True)
    assert created["spec"]["replicas"] == 2
    # Pod Security admission enforces on Pods only (it only warns on Deployments),
    # so the Deployment's pod template is tried as a Pod.
    create(apiserver, _pod(deployment["spec"]["template"]), namespace, dry_run=True)


@pytest.mark.kube
def test_restricted_namespace_refuses_a_weaker_pod(apiserver: ApiServer, namespace: str) -> None:
    """The control for the test above: the namespace's labels do enforce."""
    _restricted_namespace(apiserver, namespace)
    template = one(load(MANIFESTS / "deployment.yaml"), "Deployment")["spec"]["template"]
    del template["spec"]["containers"][0]["securityContext"]["capabilities"]
    with pytest.raises(RequestFailed) as info:
        create(apiserver, _pod(template), namespace, dry_run=True)
    assert info.value.status == 403
    assert "PodSecurity" in info.value.message


def test_deployment_runs_the_controller_leader_elected() -> None:
    deployment = one(load(MANIFESTS / "deployment.yaml"), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = container["args"]
    assert args[0] == "run"
    assert "--leader-elect" in args
    # /metrics behind TokenReview and SubjectAccessReview; the probes plain HTTP apart.
    assert {"--metrics-addr=0.0.0.0:8443", "--metrics-secure"} <= set(args)
    assert "--health-probe-addr=0.0.0.0:8081" in args
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"]["port"] == "health"
    assert container["readinessProbe"]["httpGet"]["port"] == "health"
    assert ports == {"metrics": 8443, "health": 8081, "webhook": 9443}
    # The admission webhooks, with the certificate cert-manager writes into its Secret.
    assert "--webhook-addr=0.0.0.0:9443" in args
    [mount] = [m for m in container["volumeMounts"] if m["name"] == "webhook-cert"]
    assert f"--webhook-cert-dir={mount['mountPath']}" in args
    [volume] = [v for v in pod["volumes"] if v["name"] == "webhook-cert"]
    certificate = one(load(MANIFESTS / "webhook" / "certificate.yaml"), "Certificate")
    assert volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert (
        pod["serviceAccountName"]
        == one(load(MANIFESTS / "rbac.yaml"), "ServiceAccount")["metadata"]["name"]
    )
    assert {"requests", "limits"} <= set(container["resources"])


def test_deployment_updates_and_stops_without_losing_a_replica_able_to_lead() -> None:
    deployment = one(load(MANIFESTS / "deployment.yaml"), "Deployment")
    # A rolling update adds a replica before it removes one.
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    pod = deployment["spec"]["template"]["spec"]
    # A clean stop (3 s drain, at most 4 s release) fits before the kubelet's SIGKILL.
    assert 3 + 4 < pod["terminationGracePeriodSeconds"] <= 30
    [container] = pod["containers"]
    liveness, readiness = container["livenessProbe"], container["readinessProbe"]
    # A wedged loop is restarted after tens of seconds, not on one slow answer.
    assert liveness["periodSeconds"] * liveness["failureThreshold"] >= 30
    assert readiness["httpGet"]["path"] == "/readyz"


def test_disruption_budget_lets_one_controller_replica_go_at_a_time() -> None:
    budget = one(load(MANIFESTS / "pdb.yaml"), "PodDisruptionBudget")
    deployment = one(load(MANIFESTS / "deployment.yaml"), "Deployment")
    assert budget["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in budget["spec"]
    selected = budget["spec"]["selector"]["matchLabels"]
    assert selected == deployment["spec"]["selector"]["matchLabels"]
    assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]


def test_kustomization_installs_every_manifest() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    # monitoring/ is its own kustomization: it needs the Prometheus Operator's CRDs.
    files = {str(p.relative_to(MANIFESTS)) for p in MANIFESTS.rglob("*.yaml")}
    files = {f for f in files if not f.startswith("monitoring/")}
    assert set(kustomization["resources"]) == files - {"kustomization.yaml"}
    namespaces = {
        doc["metadata"].get("namespace")
        for name in kustomization["resources"]
        for doc in load(MANIFESTS / name)
        if doc["kind"] not in CLUSTER_SCOPED | {"CustomResourceDefinition"}
    }
    assert namespaces == {one(load(MANIFESTS / "namespace.yaml"), "Namespace")["metadata"]["name"]}


@pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl (its built-in kustomize) not installed"
)
def test_kustomization_renders_the_install_with_the_image_set() -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    out = subprocess.run(
        [kubectl, "kustomize", str(MANIFESTS)], check=True, capture_output=True, text=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
        # captf-runner, -view, -edit, -plan-approver, -state-operator, -metrics-reader
        + ["ClusterRole"] * 6
        + ["CustomResourceDefinition"] * 9  # three kinds, templates, identity, plan, policy
        + ["Deployment", "PodDisruptionBudget"]
        + ["Service", "Issuer", "Certificate"]  # the webhooks' address and certificate
        + ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]
    )
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "captf:dev"

    # Our own renderer (used by `make run`, where there is no kubectl) agrees.
    def key(doc: Obj) -> tuple[str, str]:
        return doc["kind"], doc["metadata"]["name"]

    assert sorted(render(MANIFESTS), key=key) == sorted(docs, key=key)


@pytest.mark.kube
@pytest.mark.parametrize("kind", ["TerraformCluster", "TerraformMachinePool", "TerraformMachine"])
def test_names_are_limited_to_a_label_value(
    apiserver: ApiServer, namespace: str, kind: str
) -> None:
    assert create(apiserver, minimal(kind, "n" * 63), namespace, dry_run=True)
    error = rejection(lambda: create(apiserver, minimal(kind, "n" * 64), namespace, dry_run=True))
    assert "metadata.name must be at most 63 characters" in error.message
