"""`captf decide -f` end to end: a snapshot file in, one JSON line out; bad input is one
line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from controller.cli import main
from controller.core.inputs import inputs_hash
from tests.builders import (
    MODULE,
    NOW,
    ago,
    base_objects,
    captf,
    job,
    lease,
    module_configmap,
    secret,
    state,
    ts,
)

Json = dict[str, Any]
NEW_VARS = {"variables": {"size": 4}}


def _write(tmp_path: Path, doc: object, name: str = "snap.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def _snapshot(obj: Json, others: list[Json], now: str | None = None) -> Json:
    return {"now": now or ts(NOW), "objects": [obj, *others]}


def _decide(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[int, str, str]:
    status = main(["decide", "-f", str(path), *extra])
    out, err = capsys.readouterr()
    return status, out, err


# The four output shapes of the spec's `captf decide` section.
SHAPES: list[tuple[str, Json, Json]] = [
    (
        "run with a retry number",
        _snapshot(
            captf(spec=NEW_VARS),
            [*base_objects(), job("apply", 1, "failed", finished=ago(2))],
        ),
        {"action": "run", "op": "apply", "reason": "InputsChanged", "retry": 2},
    ),
    (
        "requeue in backoff, with the op",
        _snapshot(
            captf(spec=NEW_VARS),
            [
                *base_objects(),
                job("apply", 1, "failed", finished=ago(3)),
                job("apply", 2, "failed", finished=ago(0)),
            ],
        ),
        {"action": "requeue", "op": "apply", "reason": "InputsChangedBackoff", "after": 120.0},
    ),
    (
        "requeue for a lease, without an op",
        _snapshot(
            captf(spec=NEW_VARS),
            [*base_objects(), *(lease(f"captf-run-slot-{i}", f"x-apply-{i}") for i in range(10))],
        ),
        {"action": "requeue", "reason": "WaitingForRunLease", "after": 30.0},
    ),
    (
        "idle until the next scheduled check",
        _snapshot(
            captf(spec={"drift": {"interval": "1h"}}),
            [
                *base_objects(),
                job("apply", 1, "succeeded", finished=ago(120)),
                job("drift", 1, "succeeded", finished=ago(1), result={"drift": False}),
            ],
        ),
        {"action": "idle", "after": 3540.0},
    ),
]


@pytest.mark.parametrize(("doc", "expected"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_one_json_line_per_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Json, expected: Json
) -> None:
    status, out, err = _decide(capsys, _write(tmp_path, doc))
    assert (status, err) == (0, "")
    assert out.endswith("\n")
    assert out.count("\n") == 1
    assert orjson.loads(out) == expected


def test_verbose_adds_the_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = SHAPES[1][1]
    status, out, _ = _decide(capsys, _write(tmp_path, doc), "--verbose")
    decision = orjson.loads(out)
    assert status == 0
    assert decision["reason"] == "InputsChangedBackoff"
    assert "apply failed 2 time(s) in a row" in decision["message"]


def test_max_concurrent_runs_flag_counts_slots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = SHAPES[2][1]
    status, out, _ = _decide(capsys, _write(tmp_path, doc), "--max-concurrent-runs", "11")
    assert status == 0
    assert orjson.loads(out)["action"] == "run"


def test_time_like_variables_hash_as_the_strings_the_api_sends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Unquoted, YAML would read these as a date and a time; the API sends strings.
    variables = {"size": 3, "since": "2026-01-01", "at": "2026-01-01T00:00:00Z"}
    applied = state(serial=1, inputs=inputs_hash(MODULE, variables))
    objects = [captf(spec={"variables": variables}), module_configmap(), secret("creds"), applied]
    text = yaml.safe_dump({"now": ts(NOW), "objects": objects}, sort_keys=False)
    text = text.replace("'2026-01-01'", "2026-01-01").replace(
        "'2026-01-01T00:00:00Z'", "2026-01-01T00:00:00Z"
    )
    assert "since: 2026-01-01\n" in text
    status, out, err = _decide(capsys, _write(tmp_path, text))
    assert (status, err) == (0, "")
    assert orjson.loads(out) == {"action": "idle"}  # inputs equal the state's: nothing to do


def _cluster_doc() -> Json:
    return _snapshot(captf(), base_objects(applied=False))


def _with(change: Any) -> Json:
    doc = _cluster_doc()
    change(doc)
    return doc


BAD: list[tuple[str, object, str]] = [
    ("malformed YAML", "now: [unclosed\nobjects: {", "not valid YAML"),
    ("not a mapping", "- just\n- a list\n", "mapping"),
    ("no now", _with(lambda d: d.pop("now")), "no `now`"),
    ("bad time in now", _with(lambda d: d.update(now="yesterday")), "now"),
    ("now without a zone", _with(lambda d: d.update(now="2026-06-01T12:00:00")), "zone"),
    ("empty objects list", _with(lambda d: d.update(objects=[])), "non-empty"),
    ("no objects", _with(lambda d: d.pop("objects")), "non-empty"),
    (
        "first object not a CAPTF object",
        _with(lambda d: d["objects"].reverse()),
        "first object must be a CAPTF object",
    ),
    (
        "unknown kind",
        _with(lambda d: d["objects"].append({"kind": "Pod", "metadata": {"name": "p"}})),
        "unknown kind 'Pod'",
    ),
    (
        "negative limit",
        _with(lambda d: d["objects"][0]["spec"]["jobs"].update(failedJobsHistoryLimit=-1)),
        "negative",
    ),
    (
        "bad time in a Job",
        _with(
            lambda d: d["objects"].append(
                job("apply", 1, "failed")
                | {
                    "status": {
                        "conditions": [
                            {"type": "Failed", "status": "True", "lastTransitionTime": "June 1st"}
                        ]
                    }
                }
            )
        ),
        "Job/c1-apply-00000001",
    ),
    (
        "object without a name",
        _with(lambda d: d["objects"].append({"kind": "Secret", "metadata": {}})),
        "metadata.name",
    ),
    (
        "annotations that are not a mapping",
        _with(lambda d: d["objects"][0]["metadata"].update(annotations=["captf.io/approve"])),
        "metadata.annotations is not a mapping",
    ),
    (
        "spec.jobs that is not a mapping",
        _with(lambda d: d["objects"][0]["spec"].update(jobs="captf:dev")),
        "cannot decide",
    ),
    (
        "a Job's conditions that are not mappings",
        _with(
            lambda d: d["objects"].append(
                job("apply", 1, "failed") | {"status": {"conditions": ["Failed"]}}
            )
        ),
        "cannot decide",
    ),
]


@pytest.mark.parametrize(("doc", "says"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: object, says: str
) -> None:
    status, out, err = _decide(capsys, _write(tmp_path, doc))
    assert status == 2
    assert out == ""
    assert err.startswith("captf decide:")
    assert err.count("\n") == 1
    assert err.endswith("\n")
    assert says in err
    assert "Traceback" not in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _decide(capsys, tmp_path / "nope.yaml")
    assert (status, out) == (2, "")
    assert err.startswith("captf decide: cannot read")
    assert err.count("\n") == 1


def test_the_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("captf")
    good = _write(tmp_path, SHAPES[0][1], "good.yaml")
    done = subprocess.run(
        [str(script), "decide", "-f", str(good)], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert orjson.loads(done.stdout) == SHAPES[0][2]
    bad = _write(tmp_path, "objects: [", "bad.yaml")
    failed = subprocess.run(
        [str(script), "decide", "-f", str(bad)], capture_output=True, text=True, check=False
    )
    assert failed.returncode == 2
    assert failed.stdout == ""
    assert failed.stderr.startswith("captf decide:")
    assert "Traceback" not in failed.stderr


LOOSE = """\
now: 2026-06-01T12:00:00Z
objects:
- apiVersion: captf.io/v1alpha1
  kind: TerraformCluster
  metadata:
    name: c1
    annotations: {{captf.io/restore-serial: 4}}
  spec:
    module: {{configMapRef: {{name: mod}}}}
    variables: {{size: 3}}
    variablesFrom: [{{secretRef: {{name: vars}}}}]
    jobs: {{image: captf:dev}}
    drift: {{interval: 30s}}
  status: {{lastRestoredSerial: 4}}
- kind: ConfigMap
  metadata: {{name: mod}}
  data: {{main.tf: ""}}
- kind: Secret
  metadata: {{name: vars}}
  stringData: {{owner: me}}
- kind: Secret
  metadata:
    name: c1-state
    annotations: {{captf.io/serial: 1, captf.io/inputs-hash: "{hash}"}}
  stringData: {{terraform.tfstate: "{{}}"}}
- kind: Job
  metadata:
    name: c1-drift-1
    labels: {{captf.io/name: c1, captf.io/op: drift}}
    annotations: {{captf.io/result: '{{"outcome":"failed"}}'}}
  status:
    conditions:
    - {{type: Failed, status: True, lastTransitionTime: 2026-06-01T11:59:30Z}}
"""


def test_a_loosely_written_file_reads_as_the_api_would_store_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Unquoted `status: True`, `captf.io/restore-serial: 4` and `captf.io/serial: 1`,
    # and Secrets written with stringData: as the API server would have stored them.
    applied = inputs_hash({"main.tf": ""}, {"size": 3, "owner": "me"})
    status, out, err = _decide(capsys, _write(tmp_path, LOOSE.format(hash=applied)))
    assert (status, err) == (0, "")
    assert orjson.loads(out) == {
        "action": "requeue",
        "op": "drift",
        "reason": "DriftCheckDueBackoff",
        "after": 30.0,
    }
