"""The operator docs describe the product the code and manifests make, not an older one
(issue 26, item 10): the CRDs the install holds, the spec fields that exist, the
features that are here, and what a destroy leaves."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from controller.runner.state import StateStore
from tests.paths import REPO

DOCS = REPO / "docs"
COUNTS = {
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}


def _crds() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((REPO / "manifests" / "kustomization.yaml").read_text())
    paths = [REPO / "manifests" / p for p in kustomization["resources"] if p.startswith("crds/")]
    return [yaml.safe_load(p.read_text()) for p in paths]


def _spec_fields(crd: dict[str, Any]) -> set[str]:
    """The spec fields of every version the CRD serves."""
    return {
        field
        for version in crd["spec"]["versions"]
        for field in version["schema"]["openAPIV3Schema"]["properties"]
        .get("spec", {})
        .get("properties", {})
    }


def test_the_install_names_every_crd_it_installs() -> None:
    text = (DOCS / "api.md").read_text()
    said = re.search(r"installs the (\w+) CRDs", text)
    assert said is not None
    crds = _crds()
    assert COUNTS[said.group(1)] == len(crds)
    kinds = {crd["spec"]["names"]["kind"] for crd in crds}
    install = text[said.start() : text.index("\n\n", said.start())]
    for kind in kinds - {"TerraformCluster", "TerraformMachinePool", "TerraformMachine"}:
        assert f"`{kind}`" in install or kind.endswith("Template"), kind
    assert "three templates" in install


@pytest.mark.parametrize("field", ["module", "clusterRef", "poolRef"])
@pytest.mark.parametrize("page", ["api.md", "clusterapi.md", "controller.md"])
def test_no_page_names_a_spec_field_the_crds_no_longer_have(field: str, page: str) -> None:
    assert all(field not in _spec_fields(crd) for crd in _crds())
    text = (DOCS / page).read_text()
    assert f"spec.{field}" not in text
    assert f"`{field}`" not in text


def test_clusterapi_md_describes_approvals_identities_and_module_images_as_they_are() -> None:
    kinds = {crd["spec"]["names"]["kind"]: crd for crd in _crds()}
    assert {"TerraformPlan", "TerraformClusterIdentity"} <= set(kinds)
    cluster = kinds["TerraformCluster"]
    [version] = [v for v in cluster["spec"]["versions"] if v["storage"]]
    source = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["source"]
    assert "image" in source["properties"]
    text = (DOCS / "clusterapi.md").read_text()
    assert "later work" not in text
    for named in ("`TerraformPlan`", "`TerraformClusterIdentity`", "`spec.source.image`"):
        assert named in text
    for link in ("api.md#terraformplan", "api.md#identities", "module-image.md"):
        assert f"({link}" in text


def test_runner_md_says_a_successful_destroy_removes_the_state() -> None:
    assert callable(StateStore.remove)  # the runner's removal after a destroy
    text = " ".join((DOCS / "runner.md").read_text().split())
    assert "operator's decision" not in text
    assert "A destroy that succeeded removes them itself, the backups first" in text
