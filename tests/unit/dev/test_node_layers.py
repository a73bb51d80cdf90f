"""Unpacking layers: files and whiteouts applied in order, and nothing written outside
the image's root, whatever a layer says."""

from __future__ import annotations

import io
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from controller.dev.node.layers import (
    LayerRefused,
    link_target_inside,
    make_read_only,
    make_writable,
    safe_name,
    unpack_layer,
)


def entry(name: str, data: bytes = b"", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    return info, data


def kind(name: str, type_: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = type_
    info.linkname = linkname
    info.mode = 0o755
    return info, b""


def archive(path: Path, entries: Iterable[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data else None)
    return path


def test_layers_apply_in_order_with_whiteouts(tmp_path: Path) -> None:
    root = tmp_path / "root"
    first = [
        entry("etc/keep", b"keep"),
        entry("etc/gone", b"gone"),
        entry("opaque/old", b"old"),
        entry("bin/tool", b"#!", 0o4755),
        kind("etc/link", tarfile.SYMTYPE, "keep"),
        kind("etc/hard", tarfile.LNKTYPE, "etc/keep"),
    ]
    unpack_layer(archive(tmp_path / "1.tar.gz", first), root)
    second = [entry("etc/.wh.gone"), entry("opaque/.wh..wh..opq"), entry("opaque/new", b"new")]
    unpack_layer(archive(tmp_path / "2.tar.gz", second), root)

    assert (root / "etc/keep").read_bytes() == b"keep"
    assert not (root / "etc/gone").exists()
    assert [p.name for p in (root / "opaque").iterdir()] == ["new"]
    assert (root / "etc/link").read_bytes() == b"keep"
    assert (root / "etc/hard").read_bytes() == b"keep"
    assert stat.S_IMODE((root / "bin/tool").stat().st_mode) == 0o755  # setuid dropped


def test_an_uncompressed_layer_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "plain.tar"
    with tarfile.open(path, "w") as tar:
        info, data = entry("a", b"A")
        tar.addfile(info, io.BytesIO(data))
    unpack_layer(path, tmp_path / "root")
    assert (tmp_path / "root/a").read_bytes() == b"A"


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        ([entry("../escaped", b"x")], "leaves the image's root"),
        ([entry("a/../../escaped", b"x")], "leaves the image's root"),
        ([entry("/etc/escaped", b"x")], "leaves the image's root"),
        ([kind("abs", tarfile.SYMTYPE, "/etc/passwd")], "symbolic link"),
        ([kind("a/up", tarfile.SYMTYPE, "../../outside")], "symbolic link"),
        ([kind("dir", tarfile.SYMTYPE, "."), entry("dir/x", b"x")], "through the symbolic link"),
        ([kind("hard", tarfile.LNKTYPE, "../outside")], "leaves the image's root"),
        ([kind("hard", tarfile.LNKTYPE, "missing")], "no such file"),
        ([kind("dev", tarfile.CHRTYPE)], "devices and FIFOs"),
        ([kind("fifo", tarfile.FIFOTYPE)], "devices and FIFOs"),
    ],
)
def test_an_entry_that_would_leave_the_root_is_refused(
    tmp_path: Path, entries: list[tuple[tarfile.TarInfo, bytes]], says: str
) -> None:
    (tmp_path / "outside").write_text("mine")
    root = tmp_path / "images" / "root"
    with pytest.raises(LayerRefused, match=says):
        unpack_layer(archive(tmp_path / "bad.tar.gz", entries), root)
    assert (tmp_path / "outside").read_text() == "mine"
    assert not (tmp_path / "escaped").exists()


def test_a_whiteout_through_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "victim").write_text("mine")
    root = tmp_path / "images" / "root"
    # A relative link that stays inside, then a whiteout under it: the link is not followed.
    entries = [kind("d", tarfile.SYMTYPE, "."), entry("d/.wh.x")]
    with pytest.raises(LayerRefused, match="through the symbolic link"):
        unpack_layer(archive(tmp_path / "bad.tar.gz", entries), root)


def test_names_and_link_targets() -> None:
    assert str(safe_name("./a/./b")) == "a/b"
    assert link_target_inside(safe_name("a/b/link"), "../c")
    assert not link_target_inside(safe_name("a/link"), "../../c")
    assert not link_target_inside(safe_name("link"), "/abs")


def test_a_read_only_tree_can_be_made_writable_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d/f").write_text("x")
    make_read_only(root)
    assert not (root / "d/f").stat().st_mode & 0o222
    assert not (root / "d").stat().st_mode & 0o222
    # (Whether a write is then refused depends on the user: root ignores the mode bits.)
    make_writable(root)
    (root / "d/g").write_text("y")
