from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from controller.runner.binaries import TofuMissing, runner_environ, tofu_dir
from controller.runner.workdir import BACKEND_OVERRIDE_FILE, RenderError, render


def inputs(**data: bytes) -> dict[str, object]:
    return {"data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def test_render_writes_module_variables_and_backend_override(tmp_path: Path) -> None:
    secret = inputs(**{"module.main.tf": b"# main\n", "module.vars.tf": b"# vars\n"})
    secret["data"]["variables.json"] = base64.b64encode(b'{"x":"\xc3\xa9"}').decode()  # type: ignore[index]
    render(tmp_path, secret)
    assert (tmp_path / "main.tf").read_text() == "# main\n"
    assert (tmp_path / "vars.tf").read_text() == "# vars\n"
    assert json.loads((tmp_path / "terraform.tfvars.json").read_text()) == {"x": "é"}
    assert 'backend "local"' in (tmp_path / BACKEND_OVERRIDE_FILE).read_text()


def test_no_variables_means_empty_tfvars(tmp_path: Path) -> None:
    render(tmp_path, inputs(**{"module.main.tf": b""}))
    assert json.loads((tmp_path / "terraform.tfvars.json").read_text()) == {}


@pytest.mark.parametrize(
    "key", ["module.", "module..", "module.terraform.tfstate", f"module.{BACKEND_OVERRIDE_FILE}"]
)
def test_reserved_or_empty_names_are_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(RenderError):
        render(tmp_path, inputs(**{key: b"x", "module.main.tf": b""}))


def test_a_secret_without_module_files_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="no module"):
        render(tmp_path, inputs(**{"variables.json": b"{}"}))


def test_tofu_dir_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPTF_TOFU_DIR", str(tmp_path))
    with pytest.raises(TofuMissing, match="tofu not found"):
        tofu_dir(build=False)
    (tmp_path / "tofu").write_text("")
    (tmp_path / "tofurc").write_text("")
    assert tofu_dir(build=False) == tmp_path
    assert runner_environ(tmp_path) == {
        "CAPTF_TOFU": str(tmp_path / "tofu"),
        "CAPTF_TOFU_CLI_CONFIG": str(tmp_path / "tofurc"),
    }
