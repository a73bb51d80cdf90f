"""`captf decide` counts the run slots where the controller keeps them (issue 37, item 4):
the slots' namespace is `--controller-namespace`, else the file's `flags:`, else the one
namespace the snapshot's slots are in; the run-slot flags come from the command line,
else from the file's `flags:`, else `captf run`'s defaults. So decide and the controller
agree for every namespace it may run in."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from controller.cli.main import main
from controller.core import plan_pass
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.settings import Settings
from runtime.jsonobj import Json
from tests.builders import NOW, ts
from tests.unit.core.decide.test_run_cap import AT_CAP, HOME, _machine, slot

WAITS = {"action": "requeue", "reason": "WaitingForRunLease", "after": 30.0}
RUNS = {"action": "run", "op": "apply", "reason": "NoState", "retry": 1}


def _file(tmp_path: Path, slots: list[Json], flags: Json | None = None) -> Path:
    machine, others = _machine()
    doc: Json = {"now": ts(NOW), "objects": [machine, *others, *slots]}
    if flags is not None:
        doc["flags"] = flags
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _decide(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[int, Json, str]:
    status = main(["decide", "-f", str(path), *extra])
    out, err = capsys.readouterr()
    return status, orjson.loads(out) if out else {}, err


CAP = ("--max-concurrent-runs-per-cluster", "2")


@pytest.mark.parametrize(
    ("flags", "extra", "printed"),
    [
        # The slots' namespace, from the slots themselves.
        (None, CAP, WAITS),
        (None, (*CAP, "--controller-namespace", HOME), WAITS),
        (None, (*CAP, "--controller-namespace", "default"), RUNS),
        (None, (), RUNS),
        # The file's flags, and the command line over them.
        ({"max-concurrent-runs-per-cluster": 2}, (), WAITS),
        ({"max-concurrent-runs-per-cluster": 2, "controller-namespace": HOME}, (), WAITS),
        ({"max-concurrent-runs-per-cluster": 2, "controller-namespace": "x"}, (), RUNS),
        ({"max-concurrent-runs-per-cluster": 2}, ("--max-concurrent-runs-per-cluster", "0"), RUNS),
        ({"max-concurrent-runs-per-cluster": 0}, CAP, WAITS),
        ({"max-concurrent-runs": 2}, (), {**WAITS}),
        ({"max-concurrent-runs": 2}, ("--max-concurrent-runs", "3"), RUNS),
    ],
)
def test_the_cap_shows_in_the_controllers_namespace(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: Json | None,
    extra: tuple[str, ...],
    printed: Json,
) -> None:
    status, out, err = _decide(capsys, _file(tmp_path, AT_CAP, flags), *extra)
    assert (status, out, err) == (0, printed, "")


@pytest.mark.parametrize("namespace", ["default", HOME, "team-a"])
@pytest.mark.parametrize("cap", [0, 1, 2, 3])
def test_decide_prints_what_the_controller_in_that_namespace_carries_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], namespace: str, cap: int
) -> None:
    """The controller is told its namespace and flags; decide finds the namespace in the
    slots and takes the flags from the command line."""
    slots = [slot(0, "m7-apply-1", namespace=namespace), slot(1, "m8-apply-1", namespace=namespace)]
    slots += [slot(i, None, namespace=namespace) for i in range(2, 4)]
    machine, others = _machine()
    settings = Settings(max_concurrent_runs=4, max_runs_per_cluster=cap, slot_namespace=namespace)
    controller = plan_pass(snapshot.build(machine, [*others, *slots]), NOW, settings=settings)
    flags = ("--max-concurrent-runs", "4", "--max-concurrent-runs-per-cluster", str(cap))
    status, out, _ = _decide(capsys, _file(tmp_path, slots), *flags)
    assert status == 0
    assert out == to_json(controller.decision)
    assert (out["action"] == "requeue") == (cap in (1, 2))


def test_of_several_controllers_it_is_the_one_whose_slots_served_the_objects_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another controller's slots (held for another namespace's Jobs) are not this one's."""
    theirs = [slot(i, f"x{i}-apply-1", namespace="other", served="team-b") for i in range(3)]
    status, out, _ = _decide(capsys, _file(tmp_path, [*AT_CAP, *theirs]), *CAP)
    assert (status, out) == (0, WAITS)


def test_slots_in_several_namespaces_serving_the_same_need_the_controllers_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, [*AT_CAP, slot(0, "x-apply-1", namespace="other")])
    status, out, err = _decide(capsys, path, *CAP)
    assert (status, out) == (2, {})
    assert err == (
        f"captf decide: run slots are in several namespaces ({HOME}, other): name the "
        "controller's with --controller-namespace\n"
    )
    status, out, _ = _decide(capsys, path, *CAP, "--controller-namespace", HOME)
    assert (status, out) == (0, WAITS)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ([2], "must be a mapping of flag names"),
        ({"max-concurrent-runs-per-cluster": -1}, "must be an integer of at least 0"),
        ({"max-concurrent-runs": 0}, "max-concurrent-runs must be an integer of at least 1"),
        ({"max-concurrent-runs": True}, "must be an integer"),
        ({"max-concurrent-runs": "3"}, "must be an integer"),
        ({"controller-namespace": ""}, "must be a namespace's name"),
        ({"allowed-images": "*"}, "'allowed-images' is not a flag a file may set"),
    ],
)
def test_bad_flags_in_a_file_are_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: object, says: str
) -> None:
    status, out, err = _decide(capsys, _file(tmp_path, AT_CAP, flags))  # type: ignore[arg-type]
    assert (status, out) == (2, {})
    assert err.count("\n") == 1
    assert err.startswith(f"captf decide: {tmp_path / 'snap.yaml'}: flags")
    assert says in err


def test_a_negative_cap_on_the_command_line_is_refused_as_captf_run_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = _decide(capsys, _file(tmp_path, AT_CAP), CAP[0], "-1")
    assert (status, out) == (2, {})
    assert err == "captf decide: --max-concurrent-runs-per-cluster must be at least 0, got -1\n"
