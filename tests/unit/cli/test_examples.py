"""Every snapshot under examples/snapshots/ decides as its `expect:` key (and its header
comment) says, through the same `captf decide -f` an operator runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from controller.cli.main import main
from controller.core.basics.names import API_VERSION, OLD_API_VERSION
from controller.core.conversion.convert import convert
from tests.paths import REPO

SNAPSHOTS = sorted((REPO / "examples" / "snapshots").glob("*.yaml"))
HEADER = "# Expected decision: "


def test_there_are_examples() -> None:
    assert len(SNAPSHOTS) >= 8


@pytest.mark.parametrize("path", SNAPSHOTS, ids=[p.stem for p in SNAPSHOTS])
def test_example_decides_as_it_says(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = path.read_text()
    assert text.startswith("# "), "each example starts with a comment saying what it shows"
    stated = [line[len(HEADER) :] for line in text.splitlines() if line.startswith(HEADER)]
    expect = yaml.safe_load(text)["expect"]
    assert [orjson.loads(s) for s in stated] == [expect]
    assert main(["decide", "-f", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert orjson.loads(out) == expect


def test_examples_cover_the_documented_situations() -> None:
    decisions = [yaml.safe_load(p.read_text())["expect"] for p in SNAPSHOTS]
    reasons = {d.get("reason") for d in decisions}
    assert {
        "InputsChanged",
        "InputsChangedBackoff",
        "WaitingForApproval",
        "DriftRemediation",
        "WaitingForClusterOperation",
        "NoState",
        "RestoreRequested",
        "DeletionHeld",
        "Abandoned",
        "RetainedStateFound",
        "DeletingWithoutState",
        "DeletionBlocked",
        "RefreshAfterApplyBackoff",
    } <= reasons
    assert any(d["action"] == "idle" and "after" in d for d in decisions)


# Issue 26, items 1 and 3, as `captf decide` prints them (each file is also decided above).
@pytest.mark.parametrize(
    ("name", "printed"),
    [
        (
            "36-deletion-blocked-retain",
            {"action": "requeue", "reason": "DeletionBlocked", "after": 60.0},
        ),
        (
            "38-refresh-after-apply-same-second",
            {"action": "run", "op": "refresh", "reason": "RefreshAfterApply", "retry": 1},
        ),
        (
            "37-refresh-after-apply-failed",
            {
                "action": "requeue",
                "op": "refresh",
                "reason": "RefreshAfterApplyBackoff",
                "after": 30.0,
            },
        ),
    ],
)
def test_the_issue_26_snapshots_print_the_documented_decision(
    name: str, printed: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    path = REPO / "examples" / "snapshots" / f"{name}.yaml"
    assert main(["decide", "-f", str(path)]) == 0
    assert orjson.loads(capsys.readouterr().out) == printed


# Issue 37, items 2-4, as `captf decide -f` prints them (each failed on the main before
# the fix: 39 and 42 printed run apply NoState, 40 and 41 run drift DriftCheckDue).
@pytest.mark.parametrize(
    ("name", "printed"),
    [
        (
            "39-state-lost-after-move",
            {"action": "requeue", "reason": "StateLost", "after": 60.0},
        ),
        (
            "40-health-due-after-move",
            # The drift check, due too, reads the health since issue 39.
            {"action": "run", "op": "drift", "reason": "HealthCheckDue", "retry": 1},
        ),
        (
            "41-membership-due-after-move",
            {"action": "run", "op": "refresh", "reason": "MembershipRefreshDue", "retry": 1},
        ),
        (
            "42-run-cap-in-controller-namespace",
            {"action": "requeue", "reason": "WaitingForRunLease", "after": 30.0},
        ),
    ],
)
def test_the_issue_37_snapshots_print_the_documented_decision(
    name: str, printed: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    path = REPO / "examples" / "snapshots" / f"{name}.yaml"
    assert main(["decide", "-f", str(path)]) == 0
    assert orjson.loads(capsys.readouterr().out) == printed


def test_background_waits_for_its_share_in_the_issue_39_snapshot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Snapshot 43: the drift check waits for background's share though three slots are
    free (on main it printed run refresh HealthCheckDue); with the share raised by the
    flag, the file's slots leave it room and it runs."""
    path = REPO / "examples" / "snapshots" / "43-background-waits-for-its-share.yaml"
    assert main(["decide", "-f", str(path)]) == 0
    assert orjson.loads(capsys.readouterr().out) == {
        "action": "requeue",
        "op": "drift",
        "reason": "WaitingForBackgroundBudget",
        "after": 300.0,
    }
    assert main(["decide", "-f", str(path), "--background-run-share", "0.8"]) == 0
    assert orjson.loads(capsys.readouterr().out)["action"] == "run"


def test_a_moved_machines_deletion_is_held_as_before_the_move(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Snapshot 39 with a deletion: held, its message naming the applied mark."""
    doc = yaml.safe_load(
        (REPO / "examples" / "snapshots" / "39-state-lost-after-move.yaml").read_text()
    )
    doc["objects"][0]["metadata"]["deletionTimestamp"] = doc["now"]
    path = tmp_path / "deleting.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["decide", "-v", "-f", str(path)]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert (out["reason"], out["after"]) == ("DeletionHeld", 60.0)
    assert "is marked captf.io/applied; no destroy runs" in out["message"]


def _as_v1alpha1(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as a v1alpha1 client writes it: a Secret named by credentialsRef."""
    if obj.get("apiVersion") != API_VERSION:
        return obj
    old = convert(obj, OLD_API_VERSION)
    spec = old.get("spec") or {}
    ref = spec.get("identityRef") or {}
    if ref.get("kind") == "Secret":
        del spec["identityRef"]
        spec["credentialsRef"] = {"name": ref["name"]}
    return old


@pytest.mark.parametrize("path", SNAPSHOTS, ids=[p.stem for p in SNAPSHOTS])
def test_example_written_as_v1alpha1_decides_the_same(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot of objects as an older client wrote them (v1alpha1, credentialsRef) is
    read as the controller reads them through the conversion webhook."""
    doc = yaml.safe_load(path.read_text())
    doc["objects"] = [_as_v1alpha1(o) for o in doc["objects"]]
    older = tmp_path / path.name
    older.write_text(yaml.safe_dump(doc))
    assert main(["decide", "-f", str(older)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert orjson.loads(out) == doc["expect"]
