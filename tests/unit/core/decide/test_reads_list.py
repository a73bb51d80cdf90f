"""A pass looks up no Secret or ConfigMap by a name the one read list
(controller/core/decide/reads.py) does not name: the caches load exactly that list, so
a rule that reads a new name without its row there would read nothing in the
controller. Over the reasons table's cases and the example snapshots, every name a
pass asks for is one the list wanted (or a Secret the object owns, found by its name)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType

import pytest

from controller.cli.decide_settings import settings_for
from controller.cli.main import parser
from controller.cli.snapshot_file import read
from controller.core.basics.names import inputs_secret_prefix, legacy_inputs_secret_prefix
from controller.core.decide import reads, snapshot
from controller.core.decide.facts import NO_FACTS, Facts
from controller.core.decide.settings import Settings
from controller.core.plan import books
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests.builders import NOW
from tests.paths import REPO
from tests.unit.core.decide.reasons_cases import cases


class Asked(Mapping[str, Json]):
    """A read-only mapping that remembers every name it was asked for."""

    def __init__(self, inner: Mapping[str, Json], names: set[str] | None = None) -> None:
        self.inner, self.names = inner, set[str]() if names is None else names

    def __getitem__(self, key: str) -> Json:
        self.names.add(key)
        return self.inner[key]

    def __contains__(self, key: object) -> bool:
        self.names.add(str(key))
        return key in self.inner

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


def _unlisted(
    objects: list[Json], settings: Settings, facts: Facts, now: object, patch: pytest.MonkeyPatch
) -> set[str]:
    obj, others = objects[0], objects[1:]
    snap = snapshot.build(obj, others)
    secrets, maps = Asked(snap.secrets), Asked(snap.configmaps)
    # The bookkeeping's view of the snapshot (plan/books.py) copies the Secrets: its copy
    # remembers into the same set.
    patch.setattr(books, "MappingProxyType", lambda inner: Asked(inner, secrets.names))
    plan_pass(replace(snap, secrets=secrets, configmaps=maps), now, settings=settings, facts=facts)  # type: ignore[arg-type]
    wanted = set(reads.secrets_wanted(obj, snap.jobs, snap.related))
    wanted |= set(reads.state_parts_wanted(obj, wanted, snap.secrets.get))
    # Found by the object's name (reads.owns_secret): its durable inputs, its backups.
    meta = obj["metadata"]
    prefixes = (
        inputs_secret_prefix(meta["namespace"], obj["kind"], meta["name"]),
        legacy_inputs_secret_prefix(meta["name"]),
    )
    owned = {name for name, s in snap.secrets.items() if reads.owns_secret(obj, s)}
    owned |= {name for name in secrets.names if name.startswith(prefixes)}
    extra = {f"Secret {n}" for n in secrets.names - wanted - owned - {""}}  # "": no name
    return extra | {f"ConfigMap {n}" for n in maps.names - set(reads.configmaps_wanted(obj))}


def test_the_generated_cases_look_up_only_listed_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for case in cases():
        found = _unlisted(case.objects, case.settings, case.facts, NOW, monkeypatch)
        assert found == set(), case.name


def test_the_examples_look_up_only_listed_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for path in sorted((REPO / "examples" / "snapshots").glob("*.yaml")):
        found = read(str(path))
        args = parser().parse_args(["decide", "-f", str(path)])
        settings = settings_for(args, found.flags, found.objects)
        unlisted = _unlisted(found.objects, settings, NO_FACTS, found.now, monkeypatch)
        assert unlisted == set(), path.name


def test_a_lookup_of_an_unlisted_name_is_caught() -> None:
    """The check itself: a name no row lists shows up."""
    asked = Asked(MappingProxyType({}))
    assert "not-listed" not in asked
    assert asked.names == {"not-listed"}
