"""`make run`'s module images, the parts that need no registry: which directories it
takes, and the example objects pointed at the images pushed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controller.dev import module_images
from controller.dev.demo import EXAMPLES
from runtime.jsonobj import Json

PUSHED = {
    name: f"127.0.0.1:5555/captf-examples/{name}:0123456789abcdef"
    for name in ("cluster", "machine", "machinepool", "flaky")
}


def test_every_role_needs_a_directory_with_a_module_file(tmp_path: Path) -> None:
    with pytest.raises(module_images.ModulesInvalid, match="absent: no such directory"):
        module_images.role_dirs(tmp_path / "absent")
    for role in ("cluster", "machine", "machinepool"):
        (tmp_path / role).mkdir()
    (tmp_path / "cluster" / "main.tf").write_text("")
    (tmp_path / "machine" / "main.tf.json").write_text("{}")
    with pytest.raises(module_images.ModulesInvalid, match=r"machinepool: no \.tf file"):
        module_images.role_dirs(tmp_path)
    (tmp_path / "machinepool" / "main.tf").write_text("")
    (tmp_path / "machinepool" / "nested").mkdir()  # an image carries subdirectories
    assert module_images.role_dirs(tmp_path) == {
        role: tmp_path / role for role in ("cluster", "machine", "machinepool")
    }


def sources(docs: list[Json]) -> dict[str, Json]:
    found = {}
    for doc in docs:
        spec = doc.get("spec") or {}
        for holder in (spec, (spec.get("template") or {}).get("spec") or {}):
            if "source" in holder:
                found[f"{doc['kind']}/{doc['metadata']['name']}"] = holder["source"]
    return found


def test_the_examples_take_their_modules_from_the_images_pushed() -> None:
    docs = [
        module_images.point_at(doc, PUSHED)
        for path in sorted(EXAMPLES.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    pull = "IfNotPresent"
    assert sources(docs) == {
        "TerraformCluster/demo": {"image": PUSHED["cluster"], "imagePullPolicy": pull},
        "TerraformMachineTemplate/demo-md-0": {"image": PUSHED["machine"], "imagePullPolicy": pull},
        "TerraformMachinePool/demo-mp-0": {"image": PUSHED["machinepool"], "imagePullPolicy": pull},
        "TerraformCluster/flaky": {"image": PUSHED["flaky"], "imagePullPolicy": pull},
    }


def test_other_references_are_left_alone() -> None:
    doc = {"kind": "TerraformCluster", "spec": {"source": {"image": "registry.example/m:1"}}}
    assert module_images.point_at(doc, PUSHED)["spec"]["source"]["image"] == "registry.example/m:1"
