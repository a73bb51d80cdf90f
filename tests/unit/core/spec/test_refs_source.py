"""The module source readers: spec.source.configMapRef and spec.source.image."""

from __future__ import annotations

from controller.core.spec.refs import ModuleImage, configmaps_read, module_configmap, module_image


def test_an_image_source_reads_its_reference_and_pull_policy() -> None:
    spec = {"source": {"image": "registry.local/m:1", "imagePullPolicy": "Always"}}
    assert module_image(spec) == ModuleImage("registry.local/m:1", "Always")


def test_an_image_without_a_policy_is_pulled_if_not_present() -> None:
    assert module_image({"source": {"image": "r/m:1"}}) == ModuleImage("r/m:1", "IfNotPresent")


def test_an_image_source_names_no_configmap() -> None:
    spec = {"source": {"image": "r/m:1"}, "variablesFrom": [{"configMapRef": {"name": "v"}}]}
    assert module_configmap(spec) == ""
    assert configmaps_read(spec) == ["v"]


def test_a_configmap_source_has_no_image() -> None:
    assert module_image({"source": {"configMapRef": {"name": "m"}}}) is None
    assert module_image({}) is None
