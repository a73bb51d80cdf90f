"""The core's face (controller/core/face.py) gives what the rooms outside the core use,
and nothing more: every name it gives is imported from `controller.core` by some module
of controller/ outside the core (io, the CLI)."""

from __future__ import annotations

import re

from controller.core import face
from tests.paths import REPO

_IMPORT = re.compile(r"from controller\.core import (\([^)]*\)|[^\n]+)")


def _imported_from_the_face() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "controller").rglob("*.py"):
        if path.is_relative_to(REPO / "controller" / "core"):
            continue
        for found in _IMPORT.finditer(path.read_text()):
            names |= set(re.findall(r"\b\w+\b", found.group(1)))
    return names


def test_every_name_of_the_face_is_used_outside_the_core() -> None:
    assert set(face.__all__) - _imported_from_the_face() == set()
