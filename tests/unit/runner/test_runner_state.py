from __future__ import annotations

import json

import pytest

from controller.core.basics.names import LABEL_BACKUP_OF
from controller.runner.state import (
    StateConflict,
    StateError,
    StateStore,
    serial_of,
    with_serial,
)
from tests.runner_fakes import FakeKube, secret, stored_state


def tfstate(serial: int, lineage: str = "L", resources: int = 0) -> bytes:
    doc = {"version": 4, "serial": serial, "lineage": lineage, "resources": [{}] * resources}
    return (json.dumps(doc, indent=2) + "\n").encode()


def store(kube: FakeKube, keep: int = 5) -> StateStore:
    return StateStore(
        kube, secret_name="c-state", object_name="c", object_kind="TerraformCluster", keep=keep
    )


def anns(kube: FakeKube, name: str) -> dict[str, str]:
    return dict(kube.secrets[name]["metadata"]["annotations"])


async def test_first_save_creates_the_state_secret() -> None:
    kube = FakeKube()
    s = store(kube)
    assert await s.load() is None
    assert await s.save(None, tfstate(1), "h1") == 1
    assert stored_state(kube, "c-state") == tfstate(1)
    assert anns(kube, "c-state") == {"captf.io/serial": "1", "captf.io/inputs-hash": "h1"}
    loaded = await s.load()
    assert loaded is not None
    assert (loaded.serial, loaded.inputs_hash) == (1, "h1")


async def test_new_content_backs_up_the_old_state_first() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1), "h1")
    old = await s.load()
    assert await s.save(old, tfstate(2), "h2") == 2
    backup = kube.secrets["c-state-1"]
    assert stored_state(kube, "c-state-1") == tfstate(1)
    assert backup["metadata"]["labels"][LABEL_BACKUP_OF] == "c"
    assert anns(kube, "c-state-1")["captf.io/inputs-hash"] == "h1"
    assert anns(kube, "c-state")["captf.io/serial"] == "2"
    assert kube.writes.index(("create", "c-state-1")) < kube.writes.index(("replace", "c-state"))


async def test_same_content_new_hash_updates_the_annotation_without_backup() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1), "h1")
    await s.save(await s.load(), tfstate(1), "h2")
    assert anns(kube, "c-state")["captf.io/inputs-hash"] == "h2"
    assert "c-state-1" not in kube.secrets


async def test_nothing_changed_writes_nothing() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1), "h1")
    writes = list(kube.writes)
    assert await s.save(await s.load(), tfstate(1), "h1") == 1
    assert kube.writes == writes


async def test_no_inputs_hash_removes_the_annotation() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1), "h1")
    await s.save(await s.load(), tfstate(2), None)
    assert "captf.io/inputs-hash" not in anns(kube, "c-state")


async def test_only_the_newest_backups_are_kept() -> None:
    kube = FakeKube()
    s = store(kube, keep=3)
    await s.save(None, tfstate(1), "h")
    for serial in range(2, 9):
        await s.save(await s.load(), tfstate(serial), "h")
    backups = sorted(n for n in kube.secrets if n != "c-state")
    assert backups == ["c-state-5", "c-state-6", "c-state-7"]


async def test_a_new_lineage_keeps_its_own_backups() -> None:
    kube = FakeKube()
    s = store(kube, keep=2)
    await s.save(None, tfstate(10), "h")
    await s.save(await s.load(), tfstate(11), "h")
    await s.save(await s.load(), tfstate(12), "h")  # backups: 10, 11
    await s.save(await s.load(), tfstate(1, lineage="M"), "h")  # backs up 12
    await s.save(await s.load(), tfstate(2, lineage="M"), "h")  # backs up 1 (newest)
    assert sorted(n for n in kube.secrets if n != "c-state") == ["c-state-1", "c-state-12"]


async def test_a_concurrent_write_is_a_conflict_not_an_overwrite() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1), "h")
    stale = await s.load()
    await s.save(await s.load(), tfstate(2), "h")
    with pytest.raises(StateConflict):
        await s.save(stale, tfstate(3), "h")
    assert stored_state(kube, "c-state") == tfstate(2)


async def test_create_race_is_a_conflict() -> None:
    kube = FakeKube()
    await store(kube).save(None, tfstate(1), "h")
    with pytest.raises(StateConflict):
        await store(kube).save(None, tfstate(1, lineage="other"), "h")


async def test_restore_brings_back_the_backup_above_the_current_serial() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1, resources=1), "h1")
    await s.save(await s.load(), tfstate(2, resources=2), "h2")
    await s.save(await s.load(), tfstate(3, resources=3), "h3")
    assert await s.restore(1) == 4
    restored = stored_state(kube, "c-state")
    assert serial_of(restored) == 4
    assert len(json.loads(restored)["resources"]) == 1
    assert anns(kube, "c-state") == {"captf.io/serial": "4", "captf.io/inputs-hash": "h1"}
    # The state it replaced is itself a backup now.
    assert serial_of(stored_state(kube, "c-state-3")) == 3


async def test_restore_of_a_missing_backup_fails() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1), "h")
    with pytest.raises(StateError, match="c-state-7"):
        await s.restore(7)


async def test_unreadable_state_is_an_error() -> None:
    kube = FakeKube()
    labels = {"captf.io/kind": "TerraformCluster", "captf.io/name": "c"}
    kube.secrets["c-state"] = {"metadata": {"name": "c-state", "labels": labels}, "data": {}}
    with pytest.raises(StateError, match=r"terraform\.tfstate"):
        await store(kube).load()
    with pytest.raises(StateError):
        serial_of(b'{"serial": "7"}')


def test_with_serial_changes_only_the_serial() -> None:
    rewritten = json.loads(with_serial(tfstate(3, resources=2), 9))
    assert rewritten == json.loads(tfstate(9, resources=2))


async def test_a_write_whose_answer_was_lost_is_not_a_conflict() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1), "h")
    old = await s.load()
    original_replace = kube.replace_secret

    async def replace_then_conflict(name: str, body: dict[str, object]) -> dict[str, object]:
        # The first PUT lands, its answer is lost, and the retry meets our own write.
        await original_replace(name, body)
        return await original_replace(name, body)

    kube.replace_secret = replace_then_conflict  # type: ignore[method-assign]
    assert await s.save(old, tfstate(2), "h") == 2
    assert stored_state(kube, "c-state") == tfstate(2)


async def test_restore_over_a_lost_state_writes_the_backup_back() -> None:
    # The way out of a deletion held on a lost state: the backup becomes the state.
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1, resources=1), "h1")
    await s.save(await s.load(), tfstate(2, resources=2), "h2")
    del kube.secrets["c-state"]
    assert await s.restore(1) == 1
    loaded = await s.load()
    assert loaded is not None
    assert (loaded.serial, loaded.inputs_hash) == (1, "h1")


async def test_restore_over_an_unreadable_state_keeps_it_aside_first() -> None:
    kube = FakeKube()
    s = store(kube)
    await s.save(None, tfstate(1, resources=1), "h1")
    await s.save(await s.load(), tfstate(2, resources=2), "h2")
    broken = kube.secrets["c-state"]
    broken["data"] = {"garbage": "eA=="}
    broken["metadata"]["annotations"]["captf.io/serial"] = "7"
    version = broken["metadata"].get("resourceVersion", "")
    assert await s.restore(1) == 8  # above the serial the broken Secret claimed
    kept = kube.secrets[f"c-state-unreadable-{version}"]
    assert kept["data"] == {"garbage": "eA=="}
    loaded = await s.load()
    assert loaded is not None
    assert loaded.serial == 8
    assert len(json.loads(loaded.data)["resources"]) == 1


async def test_a_state_under_the_older_name_is_read_and_written_under_the_new() -> None:
    kube = FakeKube()
    kube.put(secret("c-state", {"terraform.tfstate": tfstate(3)}, {"captf.io/serial": "3"}))
    s = StateStore(
        kube, secret_name="c-cluster-k-state", object_name="c", object_kind="TerraformCluster"
    )
    old = await s.load()
    assert old is not None
    assert old.serial == 3
    assert await s.save(old, tfstate(4), "h") == 4
    assert stored_state(kube, "c-cluster-k-state") == tfstate(4)
    assert stored_state(kube, "c-cluster-k-state-3") == tfstate(3)
    # The older Secret stays for the controller to retire (controller/io/state_moves.py).
    assert stored_state(kube, "c-state") == tfstate(3)
    loaded = await s.load()
    assert loaded is not None
    assert loaded.serial == 4


@pytest.mark.parametrize(
    "labels",
    [None, {"captf.io/name": "c"}, {"captf.io/name": "c", "captf.io/kind": "TerraformMachine"}],
    ids=["none", "no kind", "another kind"],
)
async def test_a_secret_without_the_objects_labels_is_never_read_as_state(
    labels: dict[str, str] | None,
) -> None:
    kube = FakeKube()
    s = StateStore(
        kube, secret_name="c-cluster-k-state", object_name="c", object_kind="TerraformCluster"
    )
    older = secret("c-state", {"terraform.tfstate": tfstate(3)}, kind=None)
    older["metadata"]["labels"] = labels or {}
    kube.put(older)
    assert await s.load() is None  # the older name, not ours: no state
    squatter = secret("c-cluster-k-state", {"terraform.tfstate": tfstate(9)}, kind=None)
    squatter["metadata"]["labels"] = labels or {}
    kube.put(squatter)
    with pytest.raises(StateError, match="not labelled"):
        await s.load()
    with pytest.raises(StateError):
        await s.restore(3)
    assert stored_state(kube, "c-cluster-k-state") == tfstate(9)
