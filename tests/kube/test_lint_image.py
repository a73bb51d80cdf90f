"""`captf lint image` against the real registry: images built by `captf image build` or
pushed layer by layer with crane, each breaking one part of the image contract, read
back through the registry as a module author's CI step reads them."""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from controller.cli.main import main
from runtime.envtest.registry import Registry
from tests.registry_support import REGISTRY_USER, crane, dockerconfigjson

pytestmark = pytest.mark.kube

MACHINE = Path(__file__).resolve().parents[2] / "examples" / "modules" / "machine"
FileSpec = bytes | tuple[bytes, int]
MODULE: dict[str, FileSpec] = {
    f"captf/module/{p.name}": p.read_bytes() for p in sorted(MACHINE.glob("*.tf"))
}
RUNTIME: dict[str, FileSpec] = {"captf/runtime": (b"#!/bin/sh\n", 0o755)}
LABELS = {
    "io.captf.contract": "v1alpha1",
    "io.captf.role": "machine",
    "io.captf.runtime": "tofu",
    "io.captf.runtime.version": "1.12.6",
}


@pytest.fixture(autouse=True)
def no_logins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's registry logins are an empty Docker config, unless a test says else."""
    config = tmp_path / "docker-empty"
    config.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    return config


@pytest.fixture
def repo() -> str:
    return f"lint/{uuid.uuid4().hex[:10]}"


def push_image(
    registry: Registry,
    tag: str,
    files: Mapping[str, FileSpec],
    tmp_path: Path,
    *,
    labels: Mapping[str, str] = LABELS,
    user: str = "65532",
    docker_config: Path | None = None,
) -> str:
    """An image of one layer of `files` (content, or content and mode), with its labels
    and user, pushed as `registry/tag`."""
    path = tmp_path / f"{uuid.uuid4().hex}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, spec in files.items():
            data, mode = spec if isinstance(spec, tuple) else (spec, 0o644)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    target = f"{registry.host}/{tag}"
    crane(
        registry,
        "append",
        "--oci-empty-base",
        "-f",
        str(path),
        "-t",
        target,
        docker_config=docker_config,
    )
    flags = [arg for key, value in labels.items() for arg in ("-l", f"{key}={value}")]
    crane(
        registry,
        "mutate",
        target,
        *flags,
        "--user",
        user,
        "-t",
        target,
        docker_config=docker_config,
    )
    return target


def lint(
    capsys: pytest.CaptureFixture[str], reference: str, role: str = "machine", *flags: str
) -> tuple[int, Any, str]:
    """The exit status, the JSON report (None when there is none) and standard error."""
    code = main(["lint", "image", reference, "--role", role, "--json", *flags])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def rules(report: Any) -> list[tuple[str, str, str | None]]:
    return [(f["rule"], f["severity"], f["file"]) for f in report["findings"]]


def test_an_image_built_by_captf_image_build_is_clean(
    registry: Registry, repo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = tmp_path / "tofu"
    runtime.write_text('#!/bin/sh\necho \'{"terraform_version": "1.12.6"}\'\n')
    runtime.chmod(0o755)
    mirror = tmp_path / "mirror"
    (mirror / "registry.opentofu.org/hashicorp/aws/6.0.0/linux_amd64").mkdir(parents=True)
    tag = f"{registry.host}/{repo}:1"
    argv = ["image", "build", str(MACHINE), "--role", "machine", "--tag", tag]
    assert main([*argv, "--runtime", str(runtime), "--providers", str(mirror)]) == 0
    digest = capsys.readouterr().out.strip()

    code, report, err = lint(capsys, tag, "machine", "--strict")
    assert (code, report["findings"]) == (0, [])
    assert report["digest"] == digest
    assert report["labels"] == LABELS
    assert report["platform"] == "linux/amd64"
    assert err.strip() == f"captf lint: {tag} (machine): 0 error(s), 0 warning(s)"
    # By digest, the same image, without asking for a tag.
    pinned = f"{registry.host}/{repo}@{digest}"
    assert lint(capsys, pinned)[:2] == (0, {**report, "image": pinned})


def test_an_image_without_its_module_fails(
    registry: Registry, repo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = push_image(registry, f"{repo}:1", {**RUNTIME, "captf/other/main.tf": b""}, tmp_path)
    code, report, _ = lint(capsys, tag)
    assert code == 1
    assert rules(report) == [("image-module-present", "error", None)]


def test_an_image_without_a_runtime_fails(
    registry: Registry, repo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = push_image(registry, f"{repo}:1", MODULE, tmp_path)
    code, report, _ = lint(capsys, tag)
    assert (code, rules(report)) == (1, [("image-runtime-present", "error", None)])
    not_executable = {**MODULE, "captf/runtime": (b"#!/bin/sh\n", 0o644)}
    tag = push_image(registry, f"{repo}:2", not_executable, tmp_path)
    code, report, _ = lint(capsys, tag)
    assert (code, rules(report)) == (1, [("image-runtime-present", "error", "/captf/runtime")])


def test_a_role_label_naming_another_role_fails_and_the_module_is_linted_for_the_role(
    registry: Registry, repo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = push_image(registry, f"{repo}:1", {**MODULE, **RUNTIME}, tmp_path)
    code, report, _ = lint(capsys, tag, "cluster")
    assert code == 1
    found = rules(report)
    assert ("image-label-role", "error", None) in found
    # The machine module lacks the cluster role's outputs: the module checks ran too.
    assert ("output-required", "error", "/captf/module") in found
    assert {rule for rule, _, _ in found} == {
        "image-label-role",
        "input-required",
        "input-user-variable-default",
        "output-required",
    }


def test_a_file_under_a_reserved_path_fails(
    registry: Registry, repo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {**MODULE, **RUNTIME, "captf/bin/helper": b"x", "var/run/captf/credentials/k": b"k"}
    tag = push_image(registry, f"{repo}:1", files, tmp_path)
    code, report, _ = lint(capsys, tag)
    assert code == 1
    assert rules(report) == [
        ("image-reserved-paths", "error", "/captf/bin"),
        ("image-reserved-paths", "error", "/var/run/captf/credentials"),
    ]


def test_running_as_root_is_a_warning_that_fails_only_under_strict(
    registry: Registry, repo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = push_image(registry, f"{repo}:1", {**MODULE, **RUNTIME}, tmp_path, user="root")
    code, report, _ = lint(capsys, tag)
    assert (code, rules(report)) == (0, [("image-user-root", "warning", None)])
    assert report["summary"] == {"errors": 0, "warnings": 1, "failed": False}
    assert lint(capsys, tag, "machine", "--strict")[0] == 1


def test_human_output_is_one_line_per_finding(
    registry: Registry, repo: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = push_image(registry, f"{repo}:1", {**MODULE, **RUNTIME}, tmp_path, user="0")
    assert main(["lint", "image", tag, "--role", "machine"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{tag}: warning image-user-root: the image runs as user '0': set a numeric"
        " non-root USER for the restricted Pod Security profile"
    ]
    assert err.strip() == f"captf lint: {tag} (machine): 0 error(s), 1 warning(s)"


def test_an_image_not_there_is_a_registry_error(
    registry: Registry, repo: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = f"{registry.host}/{repo}:missing"
    code, report, err = lint(capsys, tag)
    assert (code, report) == (3, None)
    assert err.strip().splitlines() == [
        f"captf lint: {tag}: not found: no such image in the registry"
        " (repository, tag or digest unknown)"
    ]


@pytest.mark.parametrize("reference", ["ubuntu:24.04", "127.0.0.1:1/Bad/Repo:1"])
def test_a_reference_without_a_registry_or_malformed_is_refused_before_any_request(
    reference: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, err = lint(capsys, reference)
    assert (code, report) == (2, None)
    assert err.startswith("captf lint: image ")
    assert err.count("\n") == 1


def test_a_registry_that_answers_nothing_is_a_registry_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report, err = lint(capsys, "127.0.0.1:1/lint/mod:1")
    assert (code, report) == (3, None)
    assert err.startswith("captf lint: 127.0.0.1:1/lint/mod:1: unreachable:")


def test_401_without_credentials_and_a_clean_lint_with_them(
    auth_registry: Registry,
    repo: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user, password = REGISTRY_USER
    logins = tmp_path / "docker"
    logins.mkdir()
    (logins / "config.json").write_text(dockerconfigjson(auth_registry.host, user, password))
    tag = push_image(
        auth_registry, f"{repo}:1", {**MODULE, **RUNTIME}, tmp_path, docker_config=logins
    )

    code, report, err = lint(capsys, tag)
    assert (code, report) == (3, None)
    assert len(err.strip().splitlines()) == 1
    assert f"captf lint: {tag}: unauthorized:" in err
    assert password not in err

    monkeypatch.setenv("DOCKER_CONFIG", str(logins))
    code, report, _ = lint(capsys, tag)
    assert (code, report["findings"]) == (0, [])
