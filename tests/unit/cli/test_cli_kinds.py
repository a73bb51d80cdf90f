"""KIND and KIND/NAME on the command line: one table for every command that takes them."""

from __future__ import annotations

import pytest

from controller.cli import live
from controller.cli.kinds import ALIASES, KindError, kind_of, ref_of
from controller.cli.snapshot_file import SnapshotError
from controller.core.basics.names import CLUSTER, KINDS, PLURALS


@pytest.mark.parametrize("text", ["tfc", "TerraformCluster", "terraformclusters", "TFC"])
def test_kind_spellings(text: str) -> None:
    assert kind_of(text) == CLUSTER


@pytest.mark.parametrize("text", ["tfc", "pods/x", "tfc/a/b", "tfc/"])
def test_bad_refs_are_refused(text: str) -> None:
    with pytest.raises(KindError):
        ref_of(text)


def test_every_kind_has_its_name_plural_and_short_name() -> None:
    for kind in KINDS:
        names = {alias for alias, of in ALIASES.items() if of == kind}
        assert {kind.lower(), PLURALS[kind]} < names
        assert len(names) == 3


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_decide_live_reads_the_same_table(alias: str) -> None:
    assert live.live_ref(f"{alias.upper()}/c1") == (ALIASES[alias], "c1")
    assert ref_of(f"{alias}/c1") == (ALIASES[alias], "c1")


@pytest.mark.parametrize("text", ["pods/x", "tfc", "tfc/"])
def test_decide_live_names_the_kinds_it_takes(text: str) -> None:
    with pytest.raises(SnapshotError, match="--live wants KIND/NAME with KIND one of"):
        live.live_ref(text)
