"""One pass over a TerraformClusterIdentity: which namespaces get its copy, which lose it,
its status and its finalizer."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.core.basics.names import IDENTITY, IDENTITY_FINALIZER
from controller.core.plan.identities import (
    ANN_MIRROR_OF,
    SourceSecret,
    identity_pass,
    mirror_metadata,
)
from runtime.jsonobj import Json

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
SOURCE = SourceSecret(frozenset({"TOKEN"}), "41")
VERSION = "captf-system/aws@41"


def identity(
    allowed: Json | None = None,
    *,
    required: list[str] | None = None,
    finalizers: list[str] | None = None,
    deleting: bool = False,
) -> Json:
    meta: Json = {"name": "aws", "generation": 3, "finalizers": finalizers or []}
    if deleting:
        meta["deletionTimestamp"] = "2026-06-01T11:00:00Z"
    spec: Json = {
        "secretRef": {"namespace": "captf-system", "name": "aws"},
        "allowedNamespaces": allowed if allowed is not None else {"list": ["team-a", "team-b"]},
    }
    if required:
        spec["requiredKeys"] = required
    return {"kind": IDENTITY, "metadata": meta, "spec": spec}


def mirror(ns: str, version: str = VERSION) -> Json:
    return mirror_metadata("aws", ns, version)


USERS = {"team-a": ["TerraformCluster team-a/c1"], "team-c": ["TerraformCluster team-c/c1"]}


def _namespaces(todo_write: tuple[Json, ...]) -> list[str]:
    return [m["metadata"]["namespace"] for m in todo_write]


@pytest.mark.parametrize(
    ("source", "mirrors", "write", "delete"),
    [
        # Only a namespace that uses it and is allowed gets a copy: team-b is allowed
        # but unused, team-c used but not allowed.
        (SOURCE, {}, ["team-a"], []),
        (SOURCE, {"team-a": mirror("team-a")}, [], []),  # up to date
        (SOURCE, {"team-a": mirror("team-a", "captf-system/aws@40")}, ["team-a"], []),
        (SOURCE, {"team-a": mirror("team-a"), "team-c": mirror("team-c")}, [], ["team-c"]),
        (None, {"team-a": mirror("team-a")}, [], ["team-a"]),  # the Secret is gone: revoked
    ],
)
def test_copies_follow_use_and_permission(
    source: SourceSecret | None, mirrors: dict[str, Json], write: list[str], delete: list[str]
) -> None:
    todo = identity_pass(
        identity(), source=source, users=USERS, namespace_labels={}, mirrors=mirrors, now=NOW
    )
    assert _namespaces(todo.write) == write
    assert list(todo.delete) == delete
    for body in todo.write:
        assert "data" not in body  # io adds the data; no value passes through the core
        assert body["metadata"]["annotations"] == {ANN_MIRROR_OF: VERSION}
        assert body["metadata"]["name"] == "captf-creds-aws"
        assert "ownerReferences" not in body["metadata"]


def test_a_selector_reads_the_namespaces_labels() -> None:
    allowed = {"selector": {"matchLabels": {"tenant": "yes"}}}
    labels = {"team-a": {"tenant": "yes"}, "team-c": {"tenant": "no"}}
    todo = identity_pass(
        identity(allowed), source=SOURCE, users=USERS, namespace_labels=labels, mirrors={}, now=NOW
    )
    assert _namespaces(todo.write) == ["team-a"]


def test_missing_required_keys_copy_nothing_and_say_which() -> None:
    todo = identity_pass(
        identity(required=["TOKEN", "REGION"]),
        source=SOURCE,
        users=USERS,
        namespace_labels={},
        mirrors={"team-a": mirror("team-a")},
        now=NOW,
    )
    assert (todo.write, todo.delete) == ((), ("team-a",))
    assert todo.status is not None
    [ready] = todo.status["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "SecretKeysMissing")
    assert ready["message"].endswith("lacks the required keys REGION")


def test_status_names_the_namespaces_with_a_copy() -> None:
    todo = identity_pass(
        identity(), source=SOURCE, users=USERS, namespace_labels={}, mirrors={}, now=NOW
    )
    assert todo.status is not None
    assert todo.status["namespaces"] == ["team-a"]
    assert todo.status["users"] == 2
    assert todo.status["observedGeneration"] == 3
    [ready] = todo.status["conditions"]
    assert (ready["status"], ready["reason"]) == ("True", "SecretFound")


@pytest.mark.parametrize(
    ("finalizers", "deleting", "users", "add", "remove"),
    [
        ([], False, USERS, True, False),  # in use: held
        ([IDENTITY_FINALIZER], False, USERS, False, False),
        ([IDENTITY_FINALIZER], False, {}, False, False),  # unused, not deleted: kept
        ([], False, {}, False, False),
        ([IDENTITY_FINALIZER], True, USERS, False, False),  # deleted while in use: held
        ([IDENTITY_FINALIZER], True, {}, False, True),  # the last user gone: let go
    ],
)
def test_the_finalizer_holds_an_identity_in_use(
    finalizers: list[str], deleting: bool, users: dict[str, list[str]], add: bool, remove: bool
) -> None:
    todo = identity_pass(
        identity(finalizers=finalizers, deleting=deleting),
        source=SOURCE,
        users=users,
        namespace_labels={},
        mirrors={},
        now=NOW,
    )
    assert (todo.add_finalizer, todo.remove_finalizer) == (add, remove)


def test_a_deleted_identity_without_users_deletes_its_copies_first() -> None:
    todo = identity_pass(
        identity(finalizers=[IDENTITY_FINALIZER], deleting=True),
        source=SOURCE,
        users={},
        namespace_labels={},
        mirrors={"team-a": mirror("team-a")},
        now=NOW,
    )
    assert todo.delete == ("team-a",)
    assert todo.remove_finalizer


def test_an_unchanged_identity_writes_nothing() -> None:
    first = identity_pass(
        identity(), source=SOURCE, users=USERS, namespace_labels={}, mirrors={}, now=NOW
    )
    assert first.status is not None
    settled = identity() | {"status": first.status}
    again = identity_pass(
        settled,
        source=SOURCE,
        users=USERS,
        namespace_labels={},
        mirrors={"team-a": mirror("team-a")},
        now=NOW,
    )
    assert (again.write, again.delete, again.status) == ((), (), None)
