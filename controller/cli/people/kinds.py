"""KIND and KIND/NAME as people type them: `tfc`, `terraformcluster`, `TerraformClusters`..."""

from __future__ import annotations

from controller.core.basics.names import CLUSTER, KINDS, MACHINE, PLURALS, POOL

SHORT_NAMES = {"tfc": CLUSTER, "tfmp": POOL, "tfm": MACHINE}


class KindError(ValueError):
    """Not a CAPTF kind; the message lists the ones there are."""


def _aliases() -> dict[str, str]:
    by_name = {k.lower(): k for k in KINDS} | {p: k for k, p in PLURALS.items()}
    return by_name | SHORT_NAMES


def kind_of(text: str) -> str:
    """The kind `text` names: its name, plural or short name, in any case."""
    kind = _aliases().get(text.lower())
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
