"""spec.approvedBy is what the API server says of the approver, or nothing."""

from __future__ import annotations

import pytest

from controller.core.admission.approval import Approval, approval
from runtime.jsonobj import Json

SET_ALICE = Approval(patch=({"op": "add", "path": "/spec/approvedBy", "value": "alice"},))
REMOVE = Approval(patch=({"op": "remove", "path": "/spec/approvedBy"},))
REFUSED = "refused"


def plan(approved: bool | None = None, by: str | None = None) -> Json:
    spec: Json = {"target": {"kind": "TerraformCluster", "name": "c", "uid": "u"}}
    if approved is not None:
        spec["approved"] = approved
    if by is not None:
        spec["approvedBy"] = by
    return {"spec": spec}


@pytest.mark.parametrize(
    ("old", "new", "user", "expected"),
    [
        # Approving records the user, whatever else the request says.
        (plan(False), plan(True), "alice", SET_ALICE),
        (plan(), plan(True), "alice", SET_ALICE),
        (None, plan(True), "alice", SET_ALICE),
        (plan(False), plan(True, "alice"), "alice", Approval()),
        # Naming anyone else is refused.
        (plan(False), plan(True, "bob"), "alice", REFUSED),
        (plan(False), plan(False, "bob"), "alice", REFUSED),
        (None, plan(False, "bob"), "alice", REFUSED),
        # While approved, the record stays: unchanged, restored when dropped, never rewritten.
        (plan(True, "alice"), plan(True, "alice"), "bob", Approval()),
        (plan(True, "alice"), plan(True), "bob", SET_ALICE),
        (plan(True, "alice"), plan(True, "bob"), "bob", REFUSED),
        # Never given: no approver (a withdrawal is the validating webhook's to refuse).
        (plan(False), plan(False, "alice"), "alice", REMOVE),
        (plan(False), plan(False), "alice", Approval()),
        (None, plan(False), "controller", Approval()),
    ],
)
def test_approval(old: Json | None, new: Json, user: str, expected: Approval | str) -> None:
    found = approval(old, new, user)
    if expected == REFUSED:
        assert found.refusal is not None
        assert found.refusal.field == "spec.approvedBy"
        assert found.patch == ()
    else:
        assert found == expected
