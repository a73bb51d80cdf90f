"""The store: keys, de-duplication by resourceVersion, indexes, replace, stripping."""

from __future__ import annotations

from typing import Any

import orjson

from runtime.cache import Change, Store, label_index, owner_uid_index
from runtime.cache.store import LAST_APPLIED
from tests.unit.runtime.scripted_api import obj


def owned(name: str, rv: int, *owners: str, **labels: str) -> dict[str, Any]:
    o = obj(name, rv, **labels)
    o["metadata"]["ownerReferences"] = [{"uid": uid, "kind": "X", "name": uid} for uid in owners]
    return o


def store() -> Store:
    return Store({"by-uid": label_index("captf.io/uid"), "by-owner": owner_uid_index})


def names(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


def test_keys_are_namespace_slash_name_or_name_when_cluster_scoped() -> None:
    s = Store()
    s.upsert(obj("a", 1))
    cluster = obj("n", 2)
    del cluster["metadata"]["namespace"]
    s.upsert(cluster)
    assert sorted(s.keys()) == ["n", "ns/a"]
    assert s.get("ns/a") is not None
    assert "n" in s


def test_upsert_reports_add_then_update_and_ignores_a_version_already_held() -> None:
    s = Store()
    first, second = obj("a", 1), obj("a", 2)
    assert s.upsert(first) == Change(None, first)
    assert s.upsert(obj("a", 1)) is None
    assert s.upsert(second) == Change(first, second)
    assert s.version_of("ns/a") == "2"
    assert s.version_of("ns/missing") is None


def test_delete_reports_the_old_object_once() -> None:
    s = Store()
    a = obj("a", 1)
    s.upsert(a)
    assert s.delete(obj("a", 2)) == Change(a, None)
    assert s.delete(obj("a", 2)) is None
    assert len(s) == 0


def test_indexes_follow_label_and_owner_changes() -> None:
    s = store()
    s.upsert(owned("a", 1, "o1", **{"captf.io/uid": "u1"}))
    s.upsert(owned("b", 1, "o1", "o2", **{"captf.io/uid": "u1"}))
    assert names(s.by_index("by-uid", "u1")) == ["a", "b"]
    assert names(s.by_index("by-owner", "o2")) == ["b"]
    s.upsert(owned("b", 2, "o2", **{"captf.io/uid": "u2"}))
    assert names(s.by_index("by-uid", "u1")) == ["a"]
    assert names(s.by_index("by-uid", "u2")) == ["b"]
    assert names(s.by_index("by-owner", "o1")) == ["a"]
    s.delete(obj("a", 3))
    assert s.by_index("by-uid", "u1") == []
    assert sorted(s.index_values("by-owner")) == ["o2"]


def test_objects_without_the_label_are_not_indexed() -> None:
    s = store()
    s.upsert(obj("a", 1))
    assert s.index_values("by-uid") == []


def test_replace_adds_updates_and_deletes_whatever_vanished() -> None:
    s = store()
    a1, b1, c1 = obj("a", 1), obj("b", 1, **{"captf.io/uid": "u"}), obj("c", 1)
    for o in (a1, b1, c1):
        s.upsert(o)
    a1_again, c2, d1 = obj("a", 1), obj("c", 2), obj("d", 9)
    changes = s.replace([a1_again, c2, d1], "9")
    assert changes == [Change(c1, c2), Change(None, d1), Change(b1, None)]
    assert sorted(s.keys()) == ["ns/a", "ns/c", "ns/d"]
    assert s.by_index("by-uid", "u") == []
    assert s.resource_version == "9"


def test_managed_fields_and_last_applied_are_stripped_on_ingest() -> None:
    s = Store()
    o = obj("a", 1)
    o["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    o["metadata"]["annotations"] = {LAST_APPLIED: "{...}", "keep": "me"}
    s.upsert(o)
    [cached] = list(s)
    assert "managedFields" not in cached["metadata"]
    assert cached["metadata"]["annotations"] == {"keep": "me"}


def test_iteration_survives_mutation() -> None:
    s = Store()
    for n in range(3):
        s.upsert(obj(f"o{n}", 1))
    for o in s:
        s.delete(o)
    assert len(s) == 0


def test_what_cached_objects_repeat_is_held_once() -> None:
    """Objects decoded apart (as a watch decodes them) share their repeated strings once
    stored: label keys and values, short annotation values, namespace, owner references."""
    s = Store()
    for name in ("a", "b"):
        o = obj(name, 1, app="web")
        o["metadata"]["annotations"] = {"flag": "true", "long": "x" * 65}
        o["metadata"]["ownerReferences"] = [{"kind": "Owner", "name": "o", "uid": "u-1"}]
        s.upsert(orjson.loads(orjson.dumps(o)))
    a, b = (s.get(f"ns/{name}") for name in ("a", "b"))
    assert a is not None
    assert b is not None
    ma, mb = a["metadata"], b["metadata"]
    assert ma["namespace"] is mb["namespace"]
    assert ma["labels"]["app"] is mb["labels"]["app"]
    assert ma["annotations"]["flag"] is mb["annotations"]["flag"]
    assert ma["annotations"]["long"] == mb["annotations"]["long"]
    assert ma["ownerReferences"][0]["uid"] is mb["ownerReferences"][0]["uid"]
