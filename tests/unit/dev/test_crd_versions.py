"""Each CRD's v1beta1 is written from its v1alpha1 and the declared changes: the files are
current, a field added to v1alpha1 reaches v1beta1 with one edit, and a v1alpha1 schema
the changes no longer match stops the generator."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from controller.core.basics.names import OLD_VERSION, VERSION
from controller.dev import crd_versions
from controller.dev.crd_versions import MARKER, CrdVersionsError, generated
from runtime.jsonobj import Json
from tests.paths import REPO

CRDS = sorted((REPO / crd_versions.CRDS).glob("*.yaml"))
CLUSTERS = REPO / crd_versions.CRDS / "infrastructure.cluster.x-k8s.io_terraformclusters.yaml"


def _versions(text: str) -> dict[str, Json]:
    crd = yaml.safe_load(text)
    return {v["name"]: v for v in crd["spec"]["versions"]}


def _spec(version: Json) -> Json:
    spec: Json = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def test_the_checked_in_crds_are_what_the_generator_writes() -> None:
    assert crd_versions.differences(REPO) == [], "run `make chart` after changing a CRD"


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem.split("_")[1])
def test_every_crd_serves_both_and_stores_v1beta1(path: Path) -> None:
    text = path.read_text()
    assert generated(text) == text  # idempotent
    crd = yaml.safe_load(text)
    older, newer = crd["spec"]["versions"]
    assert (older["name"], older["served"], older["storage"], older["deprecated"]) == (
        OLD_VERSION,
        True,
        False,
        True,
    )
    assert (newer["name"], newer["served"], newer["storage"]) == (VERSION, True, True)
    assert crd["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"] == "v1alpha1_v1beta1"
    assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        "captf-system/captf-webhook-cert"
    )
    hook = crd["spec"]["conversion"]["webhook"]
    assert hook["clientConfig"]["service"]["path"] == "/convert"
    # Everything but the schema is the same in both versions.
    rest = {k: v for k, v in older.items() if k not in ("name", "storage", "deprecated")}
    rest.pop("deprecationWarning")
    assert {k: v for k, v in newer.items() if k not in ("name", "storage")} == {
        **rest,
        "schema": newer["schema"],
    }


def test_v1beta1_has_no_credentials_ref_and_requires_a_cluster_s_identity() -> None:
    versions = _versions(CLUSTERS.read_text())
    old, new = _spec(versions[OLD_VERSION]), _spec(versions[VERSION])
    assert "credentialsRef" in old["properties"]
    assert "credentialsRef" not in new["properties"]
    assert [r["rule"] for r in new["x-kubernetes-validations"]] == ["has(self.identityRef)"]
    # Apart from that one field and its rules, the spec is the same.
    trimmed = copy.deepcopy(old)
    del trimmed["properties"]["credentialsRef"]
    trimmed.pop("x-kubernetes-validations")
    new = copy.deepcopy(new)
    new.pop("x-kubernetes-validations")
    assert new == trimmed


def test_a_field_added_to_v1alpha1_reaches_v1beta1() -> None:
    text = CLUSTERS.read_text()
    anchor = "                suspend:\n"
    indent = " " * 16
    added = f"{indent}newField:\n{indent}  type: string\n{indent}  maxLength: 9\n"
    edited = text.replace(anchor, added + anchor, 1)
    assert edited != text
    versions = _versions(generated(edited))
    assert _spec(versions[VERSION])["properties"]["newField"] == {"type": "string", "maxLength": 9}


def test_a_v1alpha1_the_changes_no_longer_match_stops_the_generator() -> None:
    text = CLUSTERS.read_text().split(MARKER)[0]
    without = text.replace("credentialsRef:", "credentialsReference:", 1)
    with pytest.raises(CrdVersionsError, match="no credentialsRef to remove"):
        generated(without)
    renamed_rule = text.replace(
        "has(self.identityRef) || has(self.credentialsRef)",
        "has(self.credentialsRef) || has(self.identityRef)",
    )
    with pytest.raises(CrdVersionsError, match=r"still mentions credentialsRef|has no rule"):
        generated(renamed_rule)


def test_a_crd_born_at_v1beta1_is_left_as_written() -> None:
    text = REPO / crd_versions.CRDS / "infrastructure.cluster.x-k8s.io_terraformplans.yaml"
    written = text.read_text().split(MARKER)[0].replace("name: v1alpha1", f"name: {VERSION}")
    assert generated(written) == written


def test_the_head_edits_apply_to_a_crd_as_main_had_it() -> None:
    """What a branch from before v1beta1 still writes (v1alpha1 stored, one label value):
    merged, it is made current by the same edits."""
    text = CLUSTERS.read_text().split(MARKER)[0]
    before = (
        text.replace(
            "cluster.x-k8s.io/v1beta2: v1alpha1_v1beta1", "cluster.x-k8s.io/v1beta2: v1alpha1"
        )
        .replace("      storage: false\n      deprecated: true\n", "      storage: true\n")
        .replace(
            "  annotations:\n    cert-manager.io/inject-ca-from: captf-system/captf-webhook-cert\n",
            "",
        )
    )
    before = "\n".join(line for line in before.split("\n") if "deprecationWarning" not in line)
    assert generated(before) == CLUSTERS.read_text()
