"""What `captf image build` puts in a module image: the layer's members, modes, labels."""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath

import pytest

from controller.cli.main import parser
from controller.core.contract.roles import Role
from controller.image.build import write_layer
from controller.image.layout import EXEC_MODE, FILE_MODE, labels, members, platform_of


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    module = tmp_path / "mod"
    (module / "net").mkdir(parents=True)
    (module / "main.tf").write_text("# main\n")
    (module / "net" / "main.tf").write_text("# net\n")
    (module / ".terraform" / "providers").mkdir(parents=True)
    (module / ".terraform" / "providers" / "x").write_text("cached")
    (module / "terraform.tfstate").write_text("{}")
    (module / "terraform.tfstate.backup").write_text("{}")
    runtime = tmp_path / "tofu"
    runtime.write_text("binary")
    providers = tmp_path / "mirror"
    plugin = providers / "registry.opentofu.org" / "hashicorp" / "local" / "p"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("plugin")
    plugin.chmod(0o700)
    return module, runtime, providers


def test_members_follow_the_image_contract(tmp_path: Path) -> None:
    module, runtime, providers = _tree(tmp_path)
    found = {str(m.name): m for m in members(module, runtime, providers)}
    files = sorted(name for name, m in found.items() if m.source is not None)
    assert files == [
        "captf/module/main.tf",
        "captf/module/net/main.tf",
        "captf/providers/registry.opentofu.org/hashicorp/local/p",
        "captf/runtime",
    ]
    assert found["captf/runtime"].mode == EXEC_MODE
    assert found["captf/module/main.tf"].mode == FILE_MODE
    assert found["captf/providers/registry.opentofu.org/hashicorp/local/p"].mode == EXEC_MODE
    assert found["captf/runtime"].source == runtime


def test_parents_come_before_their_children(tmp_path: Path) -> None:
    module, runtime, providers = _tree(tmp_path)
    names = [m.name for m in members(module, runtime, providers)]
    for index, name in enumerate(names):
        assert all(
            parent in names[:index] for parent in name.parents if parent != PurePosixPath(".")
        )


def test_without_a_mirror_there_is_no_providers_directory(tmp_path: Path) -> None:
    module, runtime, _ = _tree(tmp_path)
    assert not [m for m in members(module, runtime, None) if "providers" in str(m.name)]


def test_the_layer_is_the_same_bytes_for_the_same_members(tmp_path: Path) -> None:
    module, runtime, providers = _tree(tmp_path)
    listed = members(module, runtime, providers)
    write_layer(tmp_path / "a.tar.gz", listed)
    runtime.touch()  # a newer mtime changes nothing
    write_layer(tmp_path / "b.tar.gz", listed)
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        runtime_entry = tar.getmember("captf/runtime")
        assert (runtime_entry.mode, runtime_entry.uid, runtime_entry.mtime) == (EXEC_MODE, 0, 0)
        extracted = tar.extractfile("captf/module/main.tf")
        assert extracted is not None
        assert extracted.read() == b"# main\n"


def test_labels_name_contract_role_and_runtime() -> None:
    assert labels(Role.MACHINE, "1.12.6") == {
        "io.captf.contract": "v1alpha1",
        "io.captf.role": "machine",
        "io.captf.runtime": "tofu",
        "io.captf.runtime.version": "1.12.6",
    }


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("x86_64", "linux/amd64"), ("aarch64", "linux/arm64"), ("s390x", "linux/s390x")],
)
def test_the_platform_is_this_machines(machine: str, expected: str) -> None:
    assert platform_of(machine) == expected


def test_the_command_line_takes_dir_role_tag_and_optional_binaries() -> None:
    args = parser().parse_args(["image", "build", "m", "--role", "cluster", "--tag", "r/m:1"])
    assert (args.directory, args.role, args.tag) == ("m", "cluster", "r/m:1")
    assert (args.runtime, args.providers) == (None, None)
