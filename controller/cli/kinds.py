"""KIND and KIND/NAME as people type them: `tfc`, `terraformcluster`, `TerraformClusters`...

The one table of what names a CAPTF kind on the command line, read by `captf decide
--live`, `get`, `approve`, `plan show` and `restore` alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from controller.core.basics.names import CLUSTER, KINDS, MACHINE, PLURALS, POOL

SHORT_NAMES: Final = {"tfc": CLUSTER, "tfmp": POOL, "tfm": MACHINE}

# Lower-case spelling -> kind: the kind's name, its plural, its short name.
ALIASES: Final[Mapping[str, str]] = (
    {k.lower(): k for k in KINDS} | {p: k for k, p in PLURALS.items()} | SHORT_NAMES
)


class KindError(ValueError):
    """Not a CAPTF kind; the message lists the ones there are."""


def kind_of(text: str) -> str:
    """The kind `text` names: its name, plural or short name, in any case."""
    kind = ALIASES.get(text.lower())
    if kind is None:
        names = ", ".join(f"{k} ({short})" for short, k in SHORT_NAMES.items())
        raise KindError(f"{text!r} is not a CAPTF kind; kinds: {names}")
    return kind


def ref_of(text: str) -> tuple[str, str]:
    """(kind, name) of `KIND/NAME`."""
    kind, _, name = text.partition("/")
    if not name or "/" in name:
        raise KindError(f"want KIND/NAME, e.g. tfc/example; got {text!r}")
    return kind_of(kind), name
