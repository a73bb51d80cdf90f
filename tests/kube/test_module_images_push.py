"""`make run`'s module images against the real registry: each role and the flaky
cluster pushed under a tag naming its content, and a second run taking the built layers
from the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.core.contract.roles import Role
from controller.dev import module_images
from controller.dev.demo import EXAMPLES
from controller.dev.workload import MODULES
from controller.image.build import build_and_push
from controller.image.layout import USER, labels
from runtime.envtest.registry import Registry
from tests.registry_support import crane

pytestmark = pytest.mark.kube
FLAKY = (MODULES / "cluster", EXAMPLES / "flaky")


def fake_tofu(tmp_path: Path) -> Path:
    """A runtime that reports its version, and an empty provider mirror."""
    tofu = tmp_path / "tofu-build"
    (tofu / "mirror").mkdir(parents=True)
    runtime = tofu / "tofu"
    runtime.write_text('#!/bin/sh\necho \'{"terraform_version": "1.12.6"}\'\n')
    runtime.chmod(0o755)
    return tofu


def test_each_module_is_pushed_by_content_and_a_second_run_reuses_the_layers(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAPTF_CACHE_DIR", str(tmp_path / "cache"))
    tofu = fake_tofu(tmp_path)
    roles = module_images.role_dirs(MODULES)
    said: list[str] = []
    first = module_images.push_all(roles, FLAKY, registry.host, tofu, said.append)
    assert sorted(first) == ["cluster", "flaky", "machine", "machinepool"]
    assert len(set(first.values())) == 4
    for name, reference in first.items():
        assert reference.startswith(f"{registry.host}/captf-examples/{name}:")
        assert crane(registry, "digest", reference).startswith("sha256:")
    assert all("(layers built)" in line for line in said)
    layers = sorted((tmp_path / "cache" / "module-layers").iterdir())
    assert len(layers) == 5  # one runtime layer for all four images

    said.clear()
    again = module_images.push_all(roles, FLAKY, registry.host, tofu, said.append)
    assert again == first
    assert all("(layers cached)" in line for line in said)
    assert sorted((tmp_path / "cache" / "module-layers").iterdir()) == layers


def test_a_rebuild_under_the_same_tag_moves_it_once(registry: Registry, tmp_path: Path) -> None:
    """The tag goes from the old image straight to the new: the repository never holds
    a manifest but the two built (a controller following the tag applies each it sees)."""
    runtime = fake_tofu(tmp_path) / "tofu"
    module = tmp_path / "module"
    module.mkdir()
    (module / "main.tf").write_text("# the first version\n")
    repository = "rebuilt/cluster"
    tag = f"{registry.host}/{repository}:1"
    first = build_and_push(module, Role.CLUSTER, tag, runtime=runtime, providers=None)
    (module / "main.tf").write_text("# the second version\n")
    second = build_and_push(module, Role.CLUSTER, tag, runtime=runtime, providers=None)

    assert first != second
    assert registry.manifests_of(repository) == {first, second}
    assert crane(registry, "digest", tag).strip() == second
    config = json.loads(crane(registry, "config", tag))
    assert config["config"]["User"] == USER
    assert config["config"]["Labels"] == labels(Role.CLUSTER, "1.12.6")
