"""What the operator is told about a restore annotation that names no serial: the Waiting
condition's message says it on every pass, and the Warning is due only until the stored
status shows it (so it is recorded once, not per pass)."""

from __future__ import annotations

import pytest

from controller.core.basics.names import ANN_RESTORE_SERIAL
from controller.core.basics.serials import unusable_restore_request
from controller.core.decide import snapshot
from controller.core.decide.context import Context
from controller.core.decide.steps import decide
from controller.core.plan import status as status_rules
from controller.core.spec.inputs import render
from controller.core.spec.policy import read_policy
from runtime.jsonobj import Json
from tests.builders import NOW, base_objects, captf


def _conditions(obj: Json) -> dict[str, Json]:
    snap = snapshot.build(obj, base_objects())
    ctx = Context(
        snap, NOW, read_policy(snap.spec), render(snap.spec, snap.configmaps, snap.secrets)
    )
    return {c["type"]: c for c in status_rules.conditions(ctx, decide(snap, NOW))}


@pytest.mark.parametrize(
    ("value", "note"),
    [
        ("", "captf.io/restore-serial='' is not a state serial (decimal digits): no restore runs"),
        (
            " 3",
            "captf.io/restore-serial=' 3' is not a state serial (decimal digits): no restore runs",
        ),
        ("x" * 100, f"captf.io/restore-serial='{'x' * 40}...' is not a state serial"),
        ("3", None),
        (None, None),
    ],
)
def test_the_waiting_condition_says_why_no_restore_runs(
    value: str | None, note: str | None
) -> None:
    obj = captf(annotations={ANN_RESTORE_SERIAL: value} if value is not None else None)
    waiting = _conditions(obj)["Waiting"]
    if note is None:
        assert "restore-serial" not in waiting["message"]
        assert unusable_restore_request(obj["metadata"].get("annotations") or {}) is None
    else:
        assert waiting["message"].startswith("nothing scheduled; ")
        assert note in waiting["message"]


def test_the_note_shows_also_when_the_policy_is_invalid() -> None:
    obj = captf(annotations={ANN_RESTORE_SERIAL: "abc"}, spec={"jobs": {"image": ""}})
    snap = snapshot.build(obj, base_objects())
    conds = status_rules.conditions_without_inputs(decide(snap, NOW), snap)
    assert "'abc' is not a state serial" in conds[1]["message"]


def test_the_warning_is_due_until_the_stored_status_shows_it() -> None:
    obj = captf(annotations={ANN_RESTORE_SERIAL: "abc"})
    snap = snapshot.build(obj, base_objects())
    note = unusable_restore_request(snap.annotations)
    assert status_rules.restore_warning(None, snap) == note
    assert status_rules.restore_warning({"conditions": []}, snap) == note
    shown = {"conditions": list(_conditions(obj).values())}
    assert status_rules.restore_warning(shown, snap) is None
    # Another bad value is another Warning; a good one, none.
    other = snapshot.build(captf(annotations={ANN_RESTORE_SERIAL: "-1"}), base_objects())
    assert status_rules.restore_warning(shown, other) is not None
    fine = snapshot.build(captf(annotations={ANN_RESTORE_SERIAL: "4"}), base_objects())
    assert status_rules.restore_warning(None, fine) is None
