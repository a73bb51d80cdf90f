"""An image's filesystem read from its layers as data: whiteouts, opaque directories,
links, and which contents are kept."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from controller.image import tree as tree_module
from controller.image.tree import Tree, TreeRefused, normal
from controller.lint.image_rules import Entry, Kind
from tests.registry_support import layer, symlink


def hard_link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE
    info.linkname = target
    return info


def executable(name: str, data: bytes) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o755
    return info, io.BytesIO(data)


def keep_module(path: str) -> bool:
    return path.startswith("captf/module/")


def test_layers_stack_with_whiteouts_and_opaque_directories(tmp_path: Path) -> None:
    tree = Tree(keep=keep_module)
    tree.apply(
        layer(
            tmp_path / "1.tar.gz",
            {
                "captf/module/main.tf": b"one",
                "captf/module/old.tf": b"x",
                "etc/a": b"",
                "etc/b": b"",
            },
        )
    )
    tree.apply(
        layer(
            tmp_path / "2.tar.gz",
            {"captf/module/.wh.old.tf": b"", "etc/.wh..wh..opq": b"", "etc/c": b"new"},
        )
    )
    assert sorted(tree.entries) == [
        "captf",
        "captf/module",
        "captf/module/main.tf",
        "etc",
        "etc/c",
    ]
    assert tree.contents == {"captf/module/main.tf": b"one"}
    assert tree.entries["captf"] == Entry(Kind.DIR, 0o755)  # implied by its files


def test_links_and_modes_are_kept_as_the_layer_says(tmp_path: Path) -> None:
    path = tmp_path / "l.tar"
    with tarfile.open(path, "w") as tar:
        tar.addfile(*executable("./usr/bin/tofu", b"ELF"))
        tar.addfile(symlink("captf/runtime", "/usr/bin/tofu"))
        tar.addfile(*executable("captf/module/main.tf", b"# m"))
        tar.addfile(hard_link("captf/module/copy.tf", "captf/module/main.tf"))
    tree = Tree(keep=keep_module)
    tree.apply(path)
    assert tree.entries["captf/runtime"] == Entry(Kind.SYMLINK, 0o644, "/usr/bin/tofu")
    assert tree.entries["usr/bin/tofu"] == Entry(Kind.FILE, 0o755)
    assert tree.contents == {"captf/module/main.tf": b"# m", "captf/module/copy.tf": b"# m"}
    assert "usr/bin/tofu" not in tree.contents  # read past, never held


def test_kept_contents_over_the_cap_refuse_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tree_module, "KEEP_CAP_BYTES", 4)
    with pytest.raises(TreeRefused, match="MiB under the module"):
        Tree(keep=keep_module).apply(layer(tmp_path / "l.tar.gz", {"captf/module/m.tf": b"12345"}))


def test_a_layer_that_is_no_tar_is_refused(tmp_path: Path) -> None:
    (tmp_path / "l").write_bytes(b"not a tar")
    with pytest.raises(TreeRefused, match="cannot be read"):
        Tree().apply(tmp_path / "l")


@pytest.mark.parametrize(
    ("name", "expected"),
    [("./a/b", "a/b"), ("/a//b/", "a/b"), ("../../a", "a"), ("a/../../b", "b"), (".", "")],
)
def test_names_stay_inside_the_root(name: str, expected: str) -> None:
    assert normal(name) == expected
