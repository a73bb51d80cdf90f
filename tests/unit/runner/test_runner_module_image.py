"""The runner with a module image mounted: the module, OpenTofu and the provider mirror
from the image's fixed paths, and a clear failure when no image is mounted."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from controller.runner.env import from_environ
from controller.runner.module_image import CLI_CONFIG_FILE, mirror_config, tofu_of
from controller.runner.workdir import BACKEND_OVERRIDE_FILE, RenderError, render

REFERENCE = "registry.local/modules/cluster:1"


def inputs(**data: bytes) -> dict[str, object]:
    return {"data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def image(tmp_path: Path, files: dict[str, str], *, runtime: bool = True) -> Path:
    """A mounted module image: module/ with `files`, runtime and providers/."""
    mount = tmp_path / "mount"
    for name, text in files.items():
        path = mount / "module" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o444)
    (mount / "providers").mkdir(parents=True)
    if runtime:
        (mount / "runtime").write_text("#!/bin/sh\n")
    return mount


def test_the_module_comes_from_the_image_with_its_local_modules(tmp_path: Path) -> None:
    mount = image(tmp_path, {"main.tf": "# main\n", "net/main.tf": "# net\n"})
    root = tmp_path / "root"
    root.mkdir()
    secret = inputs(image=REFERENCE.encode(), **{"variables.json": b'{"x":1}'})
    render(root, secret, image_dir=str(mount))
    assert (root / "main.tf").read_text() == "# main\n"
    assert (root / "net" / "main.tf").read_text() == "# net\n"
    assert json.loads((root / "terraform.tfvars.json").read_text()) == {"x": 1}
    # Copied as plain files: tofu may write beside them, whatever the image's modes.
    assert os.access(root / "main.tf", os.W_OK)
    assert (root / BACKEND_OVERRIDE_FILE).is_file()


def test_without_a_mounted_image_the_run_fails_naming_the_image(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=f"module image {REFERENCE}.*CAPTF_MODULE_IMAGE_DIR"):
        render(tmp_path, inputs(image=REFERENCE.encode()))


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "no module/ directory"),
        ({"README.md": "x"}, "no .tf or .tofu file"),
        ({"main.tf": "", "terraform.tfstate": "{}"}, "terraform.tfstate"),
    ],
)
def test_an_image_off_the_contract_is_refused(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    mount = image(tmp_path, files) if files else tmp_path / "empty"
    mount.mkdir(exist_ok=True)
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(RenderError, match=message):
        render(root, inputs(image=REFERENCE.encode()), image_dir=str(mount))


def test_tofu_and_its_mirror_come_from_the_image(tmp_path: Path) -> None:
    mount = image(tmp_path, {"main.tf": ""})
    work = tmp_path / "work"
    work.mkdir()
    binary, config = tofu_of(str(mount), "tofu", "/runner/tofurc", work)
    assert binary == str(mount / "runtime")
    assert config == str(work / CLI_CONFIG_FILE)
    assert Path(config).read_text() == mirror_config(mount / "providers")
    assert f'path = "{mount / "providers"}"' in Path(config).read_text()


def test_an_image_without_runtime_or_mirror_runs_the_runners_own(tmp_path: Path) -> None:
    mount = image(tmp_path, {"main.tf": ""}, runtime=False)
    (mount / "providers").rmdir()
    assert tofu_of(str(mount), "tofu", "/runner/tofurc", tmp_path) == ("tofu", "/runner/tofurc")
    assert tofu_of(None, "tofu", None, tmp_path) == ("tofu", None)


def test_the_runner_reads_where_the_image_is_mounted() -> None:
    base = {
        "CAPTF_OP": "apply",
        "CAPTF_NAMESPACE": "ns",
        "CAPTF_JOB_NAME": "j",
        "CAPTF_OBJECT_NAME": "c",
        "CAPTF_OBJECT_KIND": "TerraformCluster",
        "CAPTF_INPUTS_SECRET": "c-inputs-1",
        "CAPTF_INPUTS_HASH": "h",
        "CAPTF_STATE_SECRET": "c-state",
    }
    assert from_environ(base).module_image_dir is None
    env = from_environ(base | {"CAPTF_MODULE_IMAGE_DIR": "/captf"})
    assert env.module_image_dir == "/captf"
