"""Unpacking an image's layers into a directory, refusing what would leave it.

Layers are tar archives (gzip-compressed or not), applied in order onto one root.
There is no chroot to contain them, so every entry is checked before it is written:

- a name that is absolute or has a `..` component is refused;
- no entry is written through a symbolic link: each parent directory of the name
  must be a real directory inside the root;
- a symbolic link with an absolute target, or a relative one that climbs out of
  the root, is refused (absolute targets would point into this machine's `/`);
- a hard link must name a regular file already inside the root;
- device nodes and FIFOs are refused; setuid, setgid and sticky bits are dropped.

Whiteouts, the OCI layer format's deletions, are honoured: `.wh.NAME` removes
`NAME` from the layers below, and `.wh..wh..opq` empties its directory of what the
layers below put there. Files keep their mode bits otherwise; owners are not
changed (everything belongs to the node's user)."""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
from pathlib import Path, PurePosixPath

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
_KEPT_MODE = 0o777


class LayerRefused(Exception):
    """A layer entry that would write outside the root, or that this node cannot hold."""


def unpack_layer(archive: Path, root: Path) -> None:
    """Apply the layer at `archive` onto `root`."""
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            _apply(tar, member, root)


def safe_name(name: str) -> PurePosixPath:
    """The entry's path relative to the root; absolute paths and `..` are refused."""
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts:
        raise LayerRefused(f"layer entry {name!r} leaves the image's root")
    parts = [p for p in pure.parts if p != "."]
    return PurePosixPath(*parts)


def link_target_inside(entry: PurePosixPath, target: str) -> bool:
    """Whether a symbolic link at `entry` pointing to `target` stays inside the root."""
    if target.startswith("/"):
        return False
    resolved = posixpath.normpath(posixpath.join(str(entry.parent), target))
    return resolved != ".." and not resolved.startswith("../")


def _apply(tar: tarfile.TarFile, member: tarfile.TarInfo, root: Path) -> None:
    rel = safe_name(member.name)
    if not rel.parts:
        return  # the root itself
    parent = _real_parent(root, rel)
    base = rel.name
    if base == OPAQUE:
        for child in list(parent.iterdir()):
            _remove(child)
        return
    if base.startswith(WHITEOUT):
        _remove(parent / base[len(WHITEOUT) :])
        return
    path = parent / base
    if member.isdir():
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            _remove(path)
        path.mkdir(exist_ok=True)
        path.chmod((member.mode & _KEPT_MODE) | 0o700)
        return
    _remove(path)
    if member.issym():
        if not link_target_inside(rel, member.linkname):
            raise LayerRefused(f"symbolic link {rel} -> {member.linkname} leaves the image's root")
        path.symlink_to(member.linkname)
    elif member.islnk():
        source = (
            _real_parent(root, safe_name(member.linkname)) / PurePosixPath(member.linkname).name
        )
        if source.is_symlink() or not source.is_file():
            raise LayerRefused(f"hard link {rel} -> {member.linkname}: no such file in the image")
        os.link(source, path)
    elif member.isfile():
        _write(tar, member, path)
    else:
        raise LayerRefused(f"layer entry {rel}: devices and FIFOs are not supported")


def _real_parent(root: Path, rel: PurePosixPath) -> Path:
    """The directory that will hold `rel`, created as needed; refuses to pass through a
    symbolic link or a file, so nothing is written outside `root`."""
    current = root
    for part in rel.parts[:-1]:
        current = current / part
        if current.is_symlink():
            raise LayerRefused(f"layer entry {rel} goes through the symbolic link {part}")
        if current.exists() and not current.is_dir():
            raise LayerRefused(f"layer entry {rel}: {part} is not a directory")
        current.mkdir(exist_ok=True)
    return current


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    source = tar.extractfile(member)
    if source is None:
        raise LayerRefused(f"layer entry {member.name}: no data")
    with source, path.open("wb") as out:
        shutil.copyfileobj(source, out)
    path.chmod((member.mode & _KEPT_MODE) | 0o600)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        make_writable(path)
        shutil.rmtree(path)


def make_read_only(root: Path) -> None:
    """Take write permission off everything under `root` (the image is shared by every
    pod that mounts it; without mounts, this is what "read-only" can mean here)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*filenames, *dirnames]:
            _chmod_less(Path(dirpath) / name)
    _chmod_less(root)


def make_writable(root: Path) -> None:
    """Undo `make_read_only` so a tree can be removed."""
    root.chmod(root.stat().st_mode | 0o700)
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o700)


def _chmod_less(path: Path) -> None:
    if not path.is_symlink():
        path.chmod(path.stat().st_mode & ~0o222)
