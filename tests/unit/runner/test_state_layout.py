"""The state laid out across Secrets (controller/runner/state_layout.py): any size round
trips, a write killed at any Secret write leaves the old state or the new one whole,
and every way a stored state can be broken is an error naming it, never a missing state."""

from __future__ import annotations

import base64
import json
import os

import pytest

from controller.core.basics.names import state_part_names
from controller.runner import state_layout as layout
from controller.runner.state import StateConflict, StateError, StateStore
from tests.runner_fakes import FakeKube, stored_state

MiB = 1024 * 1024


def big_state(serial: int, size: int, lineage: str = "L") -> bytes:
    """A state of about `size` bytes that compresses little (random hex in its inputs)."""
    blob = os.urandom(size // 2).hex()
    resource = {"type": "terraform_data", "name": "big", "instances": [{"attributes": blob}]}
    doc = {"version": 4, "serial": serial, "lineage": lineage, "resources": [resource]}
    return json.dumps(doc).encode()


def store(kube: FakeKube) -> StateStore:
    return StateStore(kube, secret_name="c-state", object_name="c", object_kind="TerraformCluster")


class Killed(Exception):
    """The runner killed: no write after it happens."""


class KilledAfter(FakeKube):
    """A FakeKube whose `n`-th write (create, replace, delete) never happens."""

    def __init__(self, base: FakeKube, n: int) -> None:
        super().__init__()
        self.secrets, self._rv, self.left = base.secrets, 10_000, n

    def _tick(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise Killed

    async def create_secret(self, body: dict) -> dict:  # type: ignore[type-arg]
        self._tick()
        return await super().create_secret(body)

    async def replace_secret(self, name: str, body: dict) -> dict:  # type: ignore[type-arg]
        self._tick()
        return await super().replace_secret(name, body)

    async def delete_secret(self, name: str) -> None:
        self._tick()
        await super().delete_secret(name)


@pytest.mark.parametrize("size", [1024, 3 * MiB])
async def test_a_state_round_trips_inline_or_in_parts(size: int) -> None:
    kube = FakeKube()
    data = big_state(1, size)
    await store(kube).save(None, data, "h")
    loaded = await store(kube).load()
    assert loaded is not None
    assert loaded.data == data
    parts = [n for n in kube.secrets if "-part-" in n]
    assert (len(parts) > 1) == (size > MiB)
    # The annotation the controller reads names exactly the manifest's parts.
    state = kube.secrets["c-state"]
    named = state_part_names("c-state", state["metadata"]["annotations"])
    assert named == layout.part_names(state)
    assert sorted(named) == sorted(parts)
    for name in parts:
        assert len(kube.secrets[name]["data"]["part"]) <= 1024 * 1024  # base64 of 768 KiB
        labels = kube.secrets[name]["metadata"]["labels"]
        assert "captf.io/managed-by" not in labels  # the controller caches metadata only
        # clusterctl move carries it (a part has no owner, as the state has none).
        assert labels["clusterctl.cluster.x-k8s.io/move"] == ""
        assert (labels["captf.io/state-part-of"], labels["captf.io/kind"]) == (
            "c",
            "TerraformCluster",
        )


async def test_a_backup_names_the_same_parts_and_unnamed_parts_are_collected() -> None:
    kube = FakeKube()
    s = store(kube)
    for serial in range(1, 9):
        old = await s.load()
        await s.save(old, big_state(serial, 2 * MiB), "h")
    backups = sorted(n for n in kube.secrets if n.startswith("c-state-") and "-part-" not in n)
    assert backups == [f"c-state-{n}" for n in range(3, 8)]
    named = {p for b in ["c-state", *backups] for p in layout.part_names(kube.secrets[b])}
    assert {n for n in kube.secrets if "-part-" in n} == named  # nothing else is kept
    restored = await s.restore(4)
    assert restored == 9
    current = await s.load()
    assert current is not None
    assert (
        json.loads(current.data)["resources"]
        == json.loads(stored_state(kube, "c-state-4"))["resources"]
    )


@pytest.mark.parametrize("size", [1024, 3 * MiB])
async def test_a_runner_killed_at_any_write_leaves_the_old_or_the_new_state_whole(
    size: int,
) -> None:
    base = FakeKube()
    old_data, new_data = big_state(1, size), big_state(2, size)
    await store(base).save(None, old_data, "h")
    writes, seen = 0, set()
    while True:
        kube = FakeKube()
        kube.secrets = {k: dict(v) for k, v in base.secrets.items()}
        killed = KilledAfter(kube, writes)
        s = store(killed)
        try:
            await s.save(await s.load(), new_data, "h")
            finished = True
        except Killed:
            finished = False
        after = await store(kube).load()
        assert after is not None
        assert after.data in (old_data, new_data)
        seen.add(after.data == new_data)
        if finished:
            break
        writes += 1
    assert seen == {False, True}
    assert writes >= (5 if size > MiB else 2)  # the parts (when any), the backup, the switch


async def test_a_state_over_the_maximum_is_refused_before_anything_is_written() -> None:
    kube = FakeKube()
    data = b'{"serial": 1, "pad": "' + b"x" * (layout.MAX_STATE_BYTES + 1) + b'"}'
    with pytest.raises(StateError, match=f"{len(data)} bytes, over the maximum"):
        await store(kube).save(None, data, "h")
    assert kube.writes == []


@pytest.mark.parametrize(
    ("breakage", "said"),
    [
        ("missing part", "is missing"),
        ("part digest", "does not match its digest"),
        ("manifest digest", "does not match the manifest's digest"),
        ("manifest not JSON", "manifest is not JSON"),
    ],
)
async def test_a_broken_state_is_unreadable_and_says_why(breakage: str, said: str) -> None:
    kube = FakeKube()
    await store(kube).save(None, big_state(1, 3 * MiB), "h")
    state = kube.secrets["c-state"]
    first = layout.part_names(state)[0]
    if breakage == "missing part":
        del kube.secrets[first]
    elif breakage == "part digest":
        kube.secrets[first]["data"]["part"] = "QUJD"
    elif breakage == "manifest digest":
        manifest = json.loads(stored_manifest(state))
        manifest["sha256"] = "0" * 64
        state["data"]["manifest.json"] = encode(json.dumps(manifest).encode())
    else:
        state["data"]["manifest.json"] = encode(b"{not json")
    with pytest.raises(StateError, match=said):
        await store(kube).load()


async def test_a_state_that_is_not_json_is_refused_before_anything_is_written() -> None:
    kube = FakeKube()
    with pytest.raises(StateError, match="not JSON"):
        await store(kube).save(None, b"\x00 not a state", "h")
    assert kube.writes == []


def stored_manifest(secret: dict) -> bytes:  # type: ignore[type-arg]
    return base64.b64decode(secret["data"]["manifest.json"])


def encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


async def test_a_conflicting_write_keeps_both_states() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, big_state(1, 2 * MiB), "h")
    old = await s.load()
    assert old is not None
    await s.save(old, big_state(2, 2 * MiB), "h")  # someone else's write
    with pytest.raises(StateConflict, match="changed while this Job ran"):
        await s.save(old, big_state(3, 2 * MiB), "h")
    current = await s.load()
    assert current is not None
    assert json.loads(current.data)["serial"] == 2
