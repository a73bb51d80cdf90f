from __future__ import annotations

from typing import Any

from controller.runner import plans


def change(address: str, actions: list[str], after: Any = None) -> dict[str, Any]:
    return {"address": address, "change": {"actions": actions, "before": None, "after": after}}


PLAN = {
    "resource_changes": [
        change("a", ["no-op"]),
        change("b", ["create"], {"x": 1}),
        change("c", ["update"], {"x": 2}),
        change("d", ["delete", "create"]),
        change("e", ["delete"]),
        change("f", ["create", "delete"]),
        change("data.g", ["read"]),
        change("h", ["forget"]),
    ]
}


def test_destroyed_lists_deletes_and_replacements_only() -> None:
    assert plans.destroyed(PLAN) == ["d", "e", "f"]
    assert plans.destroyed({"resource_changes": [change("b", ["create"])]}) == []
    assert plans.destroyed({}) == []


def test_the_replacement_of_a_tainted_resource_is_not_destructive() -> None:
    """A resource a failed apply left half made: the next apply replaces it unguarded."""
    tainted = change("aws_vpc.this", ["delete", "create"]) | {
        "action_reason": "replace_because_tainted"
    }
    cannot_update = change("aws_instance.x", ["delete", "create"]) | {
        "action_reason": "replace_because_cannot_update"
    }
    plan = {"resource_changes": [tainted, cannot_update, change("e", ["delete"])]}
    assert plans.destroyed(plan) == ["aws_instance.x", "e"]


def test_changed_skips_inert_actions() -> None:
    assert plans.changed(PLAN) == [
        "create b",
        "update c",
        "delete/create d",
        "delete e",
        "create/delete f",
        "forget h",
    ]


def test_same_plan_has_no_differences_whatever_the_order_and_inert_entries() -> None:
    without_no_op = [c for c in PLAN["resource_changes"] if c["address"] != "a"]
    shuffled = {"resource_changes": list(reversed(without_no_op))}
    assert plans.differences(PLAN, shuffled) == []


def test_differences_name_changed_values_actions_and_new_resources() -> None:
    fresh = {
        "resource_changes": [
            change("b", ["create"], {"x": 9}),  # value changed
            change("c", ["delete", "create"], {"x": 2}),  # now a replacement
            change("d", ["delete", "create"]),
            change("e", ["delete"]),
            change("f", ["create", "delete"]),
            change("h", ["forget"]),
            change("z", ["create"]),  # not in the approved plan
        ]
    }
    assert plans.differences(PLAN, fresh) == ["b", "c", "z"]


def test_the_summary_lists_addresses_and_actions_and_counts_them() -> None:
    summary = plans.summarize(PLAN).to_json()
    assert summary["counts"] == {"create": 1, "update": 1, "replace": 2, "delete": 1}
    assert summary["resources"] == [
        {"address": "b", "action": "create"},
        {"address": "c", "action": "update"},
        {"address": "d", "action": "replace"},
        {"address": "e", "action": "delete"},
        {"address": "f", "action": "replace"},
        {"address": "h", "action": "forget"},
    ]
    assert summary["fingerprint"].startswith("sha256:")


def test_the_summary_holds_no_value_and_its_fingerprint_follows_the_values() -> None:
    secret_value = {"password": "hunter2-very-secret"}
    one = {"resource_changes": [change("b", ["create"], secret_value)]}
    other = {"resource_changes": [change("b", ["create"], {"password": "other"})]}
    encoded = plans.summarize(one).encode()
    assert "hunter2" not in encoded
    assert plans.summarize(one).fingerprint != plans.summarize(other).fingerprint
    shuffled = {"resource_changes": list(reversed(PLAN["resource_changes"]))}
    assert plans.summarize(shuffled).fingerprint == plans.summarize(PLAN).fingerprint


def test_the_summary_lists_at_most_fifty_addresses_and_counts_them_all() -> None:
    many = {"resource_changes": [change(f"r{i:03}", ["create"]) for i in range(120)]}
    summary = plans.summarize(many)
    assert len(summary.resources) == 50
    assert dict(summary.counts)["create"] == 120
