"""What `captf image build` puts in a module image: the layer's members, modes, labels."""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath

import pytest

from controller.cli.main import parser
from controller.core.contract.roles import Role
from controller.image.build import BuildError, layout_of, plan, write_layer
from controller.image.layout import EXEC_MODE, FILE_MODE, labels, members, platform_of

LOCAL = "registry.opentofu.org/hashicorp/local"


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
    plugin = providers / LOCAL / "2.9.0" / "linux_amd64" / "p"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("plugin")
    plugin.chmod(0o700)
    return module, runtime, providers


def mirror_of(tmp_path: Path, *addresses: str) -> Path:
    """A mirror holding a package of each address: unpacked, or packed for `.../packed`."""
    mirror = tmp_path / "baked"
    for address in addresses:
        top = mirror / address
        top.mkdir(parents=True)
        kind = address.rsplit("/", 1)[-1]
        if kind == "packed":
            (top / "index.json").write_text("{}")
            (top / f"terraform-provider-{kind}_1.0.0_linux_amd64.zip").write_text("zip")
        else:
            (top / "1.0.0" / "linux_amd64").mkdir(parents=True)
            (top / "1.0.0" / "linux_amd64" / f"terraform-provider-{kind}").write_text("bin")
    return mirror


def test_members_follow_the_image_contract(tmp_path: Path) -> None:
    module, runtime, providers = _tree(tmp_path)
    found = {str(m.name): m for m in members(module, runtime, providers, {LOCAL})}
    files = sorted(name for name, m in found.items() if m.source is not None)
    plugin = f"captf/providers/{LOCAL}/2.9.0/linux_amd64/p"
    assert files == ["captf/module/main.tf", "captf/module/net/main.tf", plugin, "captf/runtime"]
    assert found["captf/runtime"].mode == EXEC_MODE
    assert found["captf/module/main.tf"].mode == FILE_MODE
    assert found[plugin].mode == EXEC_MODE
    assert found["captf/runtime"].source == runtime


def test_parents_come_before_their_children(tmp_path: Path) -> None:
    module, runtime, providers = _tree(tmp_path)
    names = [m.name for m in members(module, runtime, providers, {LOCAL})]
    for index, name in enumerate(names):
        assert all(
            parent in names[:index] for parent in name.parents if parent != PurePosixPath(".")
        )


def test_without_a_mirror_there_is_no_providers_directory(tmp_path: Path) -> None:
    module, runtime, _ = _tree(tmp_path)
    assert not [m for m in members(module, runtime, None) if "providers" in str(m.name)]


def test_the_mirror_keeps_only_what_the_module_and_its_local_modules_require(
    tmp_path: Path,
) -> None:
    module, runtime, _ = _tree(tmp_path)
    (module / "main.tf").write_text(
        'resource "local_file" "x" {}\nmodule "net" { source = "./net" }'
    )
    (module / "net" / "main.tf").write_text(
        'terraform {\n  required_providers {\n    p = { source = "example.com/acme/packed" }\n'
        "  }\n}"
    )
    mirror = mirror_of(
        tmp_path, LOCAL, "example.com/acme/packed", "registry.opentofu.org/hashicorp/aws"
    )
    names = {str(m.name) for m in layout_of(module, runtime, mirror)}
    providers = sorted(name for name in names if name.startswith("captf/providers/"))
    assert providers == [
        "captf/providers/example.com",
        "captf/providers/example.com/acme",
        "captf/providers/example.com/acme/packed",
        "captf/providers/example.com/acme/packed/index.json",
        "captf/providers/example.com/acme/packed/terraform-provider-packed_1.0.0_linux_amd64.zip",
        "captf/providers/registry.opentofu.org",
        "captf/providers/registry.opentofu.org/hashicorp",
        f"captf/providers/{LOCAL}",
        f"captf/providers/{LOCAL}/1.0.0",
        f"captf/providers/{LOCAL}/1.0.0/linux_amd64",
        f"captf/providers/{LOCAL}/1.0.0/linux_amd64/terraform-provider-local",
    ]


def test_a_module_requiring_nothing_gets_an_empty_mirror(tmp_path: Path) -> None:
    module, runtime, providers = _tree(tmp_path)
    names = {str(m.name) for m in layout_of(module, runtime, providers)}
    assert [name for name in names if "providers" in name] == ["captf/providers"]


@pytest.mark.parametrize(
    "address", ["registry.opentofu.org/hashicorp/aws", "registry.opentofu.org/hashicorp/empty"]
)
def test_a_provider_the_mirror_lacks_fails_the_build(tmp_path: Path, address: str) -> None:
    module, runtime, _ = _tree(tmp_path)
    kind = address.rsplit("/", 1)[-1]
    (module / "main.tf").write_text(f'resource "{kind}_thing" "x" {{}}')
    mirror = mirror_of(tmp_path, LOCAL)
    (mirror / "registry.opentofu.org/hashicorp/empty/1.0.0/linux_arm64").mkdir(parents=True)
    with pytest.raises(BuildError, match=f"requires {address}, which the provider mirror"):
        layout_of(module, runtime, mirror)


def test_a_module_that_does_not_parse_fails_the_build_saying_where(tmp_path: Path) -> None:
    module, runtime, providers = _tree(tmp_path)
    (module / "main.tf").write_text("resource {")
    with pytest.raises(BuildError, match=r"main\.tf:1: not valid HCL"):
        layout_of(module, runtime, providers)


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


def test_the_runtime_has_a_layer_of_its_own_the_same_for_every_module(tmp_path: Path) -> None:
    module, _, providers = _tree(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "main.tf").write_text("# other\n")
    first = plan(module, Role.CLUSTER, runtime=fake_runtime(tmp_path), providers=providers)
    second = plan(other, Role.CLUSTER, runtime=fake_runtime(tmp_path), providers=providers)
    assert [str(m.name) for m in first.layers[0].members] == ["captf", "captf/runtime"]
    assert first.layers[0].key == second.layers[0].key
    assert first.layers[-1].key != second.layers[-1].key
    assert "captf/runtime" not in {str(m.name) for m in first.layers[-1].members}
    again = plan(module, Role.CLUSTER, runtime=fake_runtime(tmp_path), providers=providers)
    assert again.key == first.key
    assert plan(module, Role.MACHINE, runtime=fake_runtime(tmp_path), providers=providers).key != (
        first.key
    )


def fake_runtime(tmp_path: Path) -> Path:
    runtime = tmp_path / "fake-tofu"
    if not runtime.exists():
        runtime.write_text('#!/bin/sh\necho \'{"terraform_version": "1.12.6"}\'\n')
        runtime.chmod(0o755)
    return runtime


def test_modules_requiring_the_same_providers_share_the_providers_layer(tmp_path: Path) -> None:
    """The three roles of a module set carry one provider layer: a registry stores it once."""
    _, _, providers = _tree(tmp_path)
    roles = {}
    for role in Role:
        directory = tmp_path / f"set-{role.value}"
        directory.mkdir()
        (directory / "main.tf").write_text(
            f'# {role.value}\nresource "local_file" "f" {{\n  filename = "x"\n  content = ""\n}}\n'
        )
        roles[role] = plan(directory, role, runtime=fake_runtime(tmp_path), providers=providers)
    for planned in roles.values():
        assert len(planned.layers) == 3
        names = [str(m.name) for m in planned.layers[1].members]
        assert names[:2] == ["captf", "captf/providers"]
        assert all(n == "captf" or n.startswith("captf/providers") for n in names)
        assert not any(
            n.startswith("captf/providers")
            for m in planned.layers[2].members
            for n in [str(m.name)]
        )
    assert len({p.layers[1].key for p in roles.values()}) == 1  # one provider layer
    assert len({p.layers[0].key for p in roles.values()}) == 1  # one runtime layer
    assert len({p.layers[2].key for p in roles.values()}) == 3  # a module layer each


@pytest.mark.parametrize("mirror", [False, True], ids=["no mirror", "nothing required"])
def test_an_image_carrying_no_provider_has_two_layers(tmp_path: Path, mirror: bool) -> None:
    module, _, providers = _tree(tmp_path)
    planned = plan(
        module,
        Role.CLUSTER,
        runtime=fake_runtime(tmp_path),
        providers=providers if mirror else None,
    )
    assert len(planned.layers) == 2
    names = {str(m.name) for m in planned.layers[1].members}
    assert ("captf/providers" in names) is mirror
