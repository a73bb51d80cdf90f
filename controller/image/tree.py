"""An image's filesystem as data, from its layers, without writing a file of it.

Layers are tar archives (gzip-compressed or not) applied in order, OCI whiteouts
honoured: `.wh.NAME` removes NAME and what is below it, `.wh..wh..opq` removes what
the lower layers put in its directory. Each path becomes an `Entry` (kind, mode, link
target); parents an archive leaves implicit become directories. Contents are kept
only for paths a caller asks for (`keep`), hard links included, up to a cap: the
rest (a runtime, provider archives) is read past, never held."""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from controller.lint.image_rules import Entry, Kind

WHITEOUT: Final = ".wh."
OPAQUE: Final = ".wh..wh..opq"
KEEP_CAP_BYTES: Final = 64 << 20


class TreeRefused(Exception):
    """A layer that cannot be read, or kept contents over the cap."""


@dataclass
class Tree:
    entries: dict[str, Entry] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    keep: Callable[[str], bool] = lambda _: False
    kept_bytes: int = 0

    def apply(self, archive: Path) -> None:
        """Apply one layer on top of what is here."""
        added: set[str] = set()
        try:
            with tarfile.open(archive, "r:*") as tar:
                for member in tar:
                    self._apply(tar, member, added)
        except (OSError, EOFError, tarfile.TarError) as exc:
            raise TreeRefused(f"a layer cannot be read: {exc}") from None

    def _apply(self, tar: tarfile.TarFile, member: tarfile.TarInfo, added: set[str]) -> None:
        path = normal(member.name)
        if not path:
            return
        parent, base = posixpath.split(path)
        if base == OPAQUE:
            self._remove_below(parent, spare=added)
            return
        if base.startswith(WHITEOUT):
            self._remove(posixpath.join(parent, base[len(WHITEOUT) :]))
            return
        self._parents(parent, added)
        if not member.isdir():
            self._remove(path)
        self.entries[path] = _entry(member)
        added.add(path)
        if member.islnk():
            self._hard_link(path, normal(member.linkname))
        elif member.isfile() and self.keep(path):
            self._keep(path, tar, member)

    def _hard_link(self, path: str, source: str) -> None:
        if self.entries.get(source, Entry(Kind.OTHER)).kind is Kind.FILE:
            self.entries[path] = self.entries[source]
        if source in self.contents and self.keep(path):
            self.contents[path] = self.contents[source]

    def _keep(self, path: str, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.kept_bytes += member.size
        if self.kept_bytes > KEEP_CAP_BYTES:
            raise TreeRefused(f"more than {KEEP_CAP_BYTES >> 20} MiB under the module's paths")
        data = tar.extractfile(member)
        self.contents[path] = data.read() if data is not None else b""

    def _parents(self, parent: str, added: set[str]) -> None:
        parts = parent.split("/") if parent else []
        for depth in range(1, len(parts) + 1):
            here = "/".join(parts[:depth])
            if self.entries.get(here, Entry(Kind.OTHER)).kind is not Kind.DIR:
                self._remove(here)
                self.entries[here] = Entry(Kind.DIR, 0o755)
                added.add(here)

    def _remove(self, path: str) -> None:
        self.entries.pop(path, None)
        self.contents.pop(path, None)
        self._remove_below(path, spare=set())

    def _remove_below(self, path: str, *, spare: set[str]) -> None:
        prefix = path + "/" if path else ""
        for gone in [p for p in self.entries if p.startswith(prefix) and p not in spare]:
            self.entries.pop(gone, None)
            self.contents.pop(gone, None)


def normal(name: str) -> str:
    """A tar name as an image path: no leading `/` or `./`, no `.` parts; `..` cannot
    climb above the root."""
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _entry(member: tarfile.TarInfo) -> Entry:
    mode = member.mode & 0o7777
    if member.isdir():
        return Entry(Kind.DIR, mode)
    if member.issym():
        return Entry(Kind.SYMLINK, mode, member.linkname)
    if member.isfile() or member.islnk():
        return Entry(Kind.FILE, mode)
    return Entry(Kind.OTHER, mode)
