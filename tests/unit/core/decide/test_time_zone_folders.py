"""Every folder of the time-zone database as a change window's zone: DecideOp never raises.

The CRD's pattern admits `America/Indiana` as readily as `America/New_York`; only
loading tells a folder from a zone. The folders are read from the database itself
(the parents of every available zone, and the folders on the zone search path), so a
newer database with a new folder is covered without a change here."""

from __future__ import annotations

import os
import zoneinfo
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.decide import snapshot
from controller.core.decide.decision import Requeue
from controller.core.decide.steps import decide
from controller.core.spec.windows import DAYS
from tests.builders import NOW, ago, base_objects, captf, job


def _folders() -> list[str]:
    parents = {
        zone.rsplit("/", i)[0]
        for zone in zoneinfo.available_timezones()
        for i in range(1, zone.count("/") + 1)
    }
    on_path = {
        str(Path(top, sub).relative_to(root))
        for root in zoneinfo.TZPATH
        if os.path.isdir(root)
        for top, subs, _ in os.walk(root)
        for sub in subs
    }
    return sorted(parents | on_path)


FOLDERS = _folders()


def test_the_database_has_the_folders_the_issue_named() -> None:
    assert {"America/Indiana", "America/Argentina", "Etc"} <= set(FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_folder_is_an_invalid_policy_naming_it(folder: str) -> None:
    windows = [{"start": "22:00", "duration": "2h", "timeZone": folder}]
    decision = decide(snapshot.build(captf(spec={"changeWindows": windows}), base_objects()), NOW)
    assert isinstance(decision, Requeue)
    assert (decision.reason, decision.after) == ("JobPolicyInvalid", 600.0)
    assert repr(folder) in decision.message


WINDOW = st.fixed_dictionaries(
    {
        "timeZone": st.sampled_from(FOLDERS),
        "days": st.lists(st.sampled_from(DAYS), max_size=7, unique=True),
        "start": st.sampled_from(["00:00", "09:30", "22:00"]),
        "duration": st.sampled_from(["30m", "4h", "168h"]),
    }
)
HISTORY = st.lists(
    st.tuples(
        st.sampled_from(["apply", "destroy", "drift", "refresh"]),
        st.sampled_from(["succeeded", "failed", "interrupted", "blocked"]),
        st.integers(min_value=0, max_value=7200),
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    folder_first=st.booleans(),
    folder=WINDOW,
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/Indiana/Indianapolis"]),
    history=HISTORY,
    deleting=st.booleans(),
)
def test_decide_never_raises_on_a_folder_zone(
    folder_first: bool,
    folder: dict[str, object],
    zone: str,
    history: list[tuple[str, str, int]],
    deleting: bool,
) -> None:
    valid = {"start": "09:00", "duration": "1h", "timeZone": zone}
    windows = [folder, valid] if folder_first else [valid, folder]
    obj = captf(
        spec={"variables": {"size": 4}, "changeWindows": windows},
        deleting=ago(1) if deleting else None,
        finalizers=["captf.io/destroy"] if deleting else None,
    )
    jobs = [
        job(op, seq, outcome, finished=NOW - timedelta(seconds=secs))
        for seq, (op, outcome, secs) in enumerate(history, 1)
    ]
    decision = decide(snapshot.build(obj, [*base_objects(), *jobs]), NOW)
    assert isinstance(decision, Requeue)
    assert decision.reason == "JobPolicyInvalid"
    assert decision.after == 600.0
    assert repr(folder["timeZone"]) in decision.message
