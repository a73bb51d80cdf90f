"""`captf get -o json|yaml` shows a machine's HealthWatched condition as `health`."""

from __future__ import annotations

from controller.cli.people import rows
from controller.core.basics.names import MACHINE
from tests.builders import NOW, captf

WATCHED = {
    "type": "HealthWatched",
    "status": "True",
    "reason": "HealthWatched",
    "message": "refresh Job m1-refresh-1 read stopped at 2026-06-01T11:59:00Z",
    "lastTransitionTime": "2026-06-01T11:00:00Z",
}


def test_get_shows_the_health_watch_of_a_machine_and_none_for_others() -> None:
    machine = captf(MACHINE, "m1", status={"conditions": [WATCHED]})
    out = rows.to_json(rows.row_of(machine, []), NOW)
    assert out["health"] == {
        "status": "True",
        "reason": "HealthWatched",
        "message": WATCHED["message"],
    }
    assert rows.to_json(rows.row_of(captf(), []), NOW)["health"] is None
