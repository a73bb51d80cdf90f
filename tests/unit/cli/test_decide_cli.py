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

from controller.cli.main import main
from controller.core.decide.triggers import jitter
from controller.core.spec.inputs import inputs_hash
from runtime.jsonobj import Json
from tests.builders import (
    MODULE,
    NOW,
    ago,
    base_objects,
    capi_cluster,
    captf,
    decided,
    job,
    lease,
    module_configmap,
    secret,
    state,
    ts,
)

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
        {"action": "idle", "after": 3540.0 + jitter("uid-c1", "drift", 3600)},
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


def test_an_identity_in_the_file_is_read_as_the_controller_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The identity, its Secret (in its own namespace) and the Namespace's labels decide."""
    spec = {"identityRef": {"kind": "TerraformClusterIdentity", "name": "aws"}}
    obj = captf(spec={**spec})
    source = secret("aws", {"TOKEN": "t0ken-value"})
    source["metadata"]["namespace"] = "captf-system"
    identity = {
        "kind": "TerraformClusterIdentity",
        "metadata": {"name": "aws"},
        "spec": {
            "secretRef": {"namespace": "captf-system", "name": "aws"},
            "allowedNamespaces": {"selector": {"matchLabels": {"team": "a"}}},
        },
    }
    copy = secret("captf-creds-aws", {"TOKEN": "t0ken-value"})
    others = [*base_objects(applied=False), identity, source, copy]
    for labels, expected in (({"team": "b"}, "requeue"), ({"team": "a"}, "run")):
        space = {"kind": "Namespace", "metadata": {"name": "default", "labels": labels}}
        path = _write(tmp_path, _snapshot(obj, [*others, space]))
        status, out, err = _decide(capsys, path)
        assert (status, err) == (0, "")
        assert orjson.loads(out)["action"] == expected


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
    objects = [captf(spec={"variables": variables}), capi_cluster(), module_configmap()]
    objects += [secret("creds"), applied]
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
        "TerraformCluster/c1 spec.jobs is not a mapping",
    ),
    # Each row below printed a Python exception name (or a traceback) before the shape
    # check that now names the field.
    ("deeply nested YAML", "now: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("kind that is a list", _with(lambda d: d["objects"][0].update(kind=["Job"])), "unknown kind"),
    (
        "spec.source that is a string",
        _with(lambda d: d["objects"][0]["spec"].update(source="mod")),
        "spec.source is not a mapping",
    ),
    (
        "spec.source.configMapRef.name that is a list",
        _with(lambda d: d["objects"][0]["spec"].update(source={"configMapRef": {"name": ["m"]}})),
        "spec.source.configMapRef.name is not a string",
    ),
    (
        "spec.variables that is a list",
        _with(lambda d: d["objects"][0]["spec"].update(variables=[1])),
        "spec.variables is not a mapping",
    ),
    (
        "spec.variablesFrom entry that is a string",
        _with(lambda d: d["objects"][0]["spec"].update(variablesFrom=["vars"])),
        "spec.variablesFrom[0] is not a mapping",
    ),
    (
        "spec.variablesFrom secretRef key that is a number",
        _with(
            lambda d: d["objects"][0]["spec"].update(
                variablesFrom=[{"secretRef": {"name": "vars", "key": 5}}]
            )
        ),
        "spec.variablesFrom[0].secretRef.key is not a string",
    ),
    (
        "spec.credentialsRef that is a string",
        _with(lambda d: d["objects"][0]["spec"].update(credentialsRef="creds")),
        "spec.credentialsRef is not a mapping",
    ),
    (
        "spec.dependsOn that is a mapping",
        _with(lambda d: d["objects"][0]["spec"].update(dependsOn={"kind": "TerraformCluster"})),
        "spec.dependsOn is not a list",
    ),
    (
        "metadata.ownerReferences entry that is a string",
        _with(lambda d: d["objects"][0]["metadata"].update(ownerReferences=["c0"])),
        "metadata.ownerReferences[0] is not a mapping",
    ),
    (
        "a Cluster's spec.paused that is a string",
        _with(
            lambda d: d["objects"].append(
                {"kind": "Cluster", "metadata": {"name": "c0"}, "spec": {"paused": "yes"}}
            )
        ),
        "Cluster/c0 spec.paused is not a boolean",
    ),
    (
        "a Machine's infrastructureRef that is a string",
        _with(
            lambda d: d["objects"].append(
                {"kind": "Machine", "metadata": {"name": "m0"}, "spec": {"infrastructureRef": "x"}}
            )
        ),
        "Machine/m0 spec.infrastructureRef is not a mapping",
    ),
    (
        "status.activeJob that is a list",
        _with(lambda d: d["objects"][0]["status"].update(activeJob=["c1-apply-1"])),
        "status.activeJob is not a string",
    ),
    (
        "status.stateSerial that is a boolean",
        _with(lambda d: d["objects"][0]["status"].update(stateSerial=True)),
        "status.stateSerial is not an integer",
    ),
    (
        "finalizers that are a string",
        _with(lambda d: d["objects"][0]["metadata"].update(finalizers="captf.io/destroy")),
        "TerraformCluster/c1 metadata.finalizers is not a list",
    ),
    (
        "a Job's namespace that is a list",
        _with(
            lambda d: d["objects"].append(
                job("apply", 1, "failed") | {"metadata": {"name": "j", "namespace": ["default"]}}
            )
        ),
        "Job/j metadata.namespace is not a string",
    ),
    (
        "a Job's ownerReferences that are strings",
        _with(
            lambda d: d["objects"].append(
                {"kind": "Job", "metadata": {"name": "j", "ownerReferences": ["c1"]}}
            )
        ),
        "Job/j metadata.ownerReferences[0] is not a mapping",
    ),
    (
        "a Job's conditions that are a mapping",
        _with(
            lambda d: d["objects"].append(
                job("apply", 1, "failed") | {"status": {"conditions": {"type": "Failed"}}}
            )
        ),
        "Job/c1-apply-00000001 status.conditions is not a list",
    ),
    (
        "a related cluster's conditions that are strings",
        _with(
            lambda d: d["objects"].append(captf(name="c0") | {"status": {"conditions": ["Ready"]}})
        ),
        "TerraformCluster/c0 status.conditions[0] is not a mapping",
    ),
    (
        "ConfigMap data that is a list",
        _with(
            lambda d: next(o for o in d["objects"] if o["kind"] == "ConfigMap").update(
                data=["main.tf"]
            )
        ),
        "data is not a mapping",
    ),
    (
        "a Lease whose spec is a string",
        _with(
            lambda d: d["objects"].append({"kind": "Lease", "metadata": {"name": "l"}, "spec": "x"})
        ),
        "Lease/l spec is not a mapping",
    ),
    (
        "a Job's conditions that are not mappings",
        _with(
            lambda d: d["objects"].append(
                job("apply", 1, "failed") | {"status": {"conditions": ["Failed"]}}
            )
        ),
        "Job/c1-apply-00000001 status.conditions[0] is not a mapping",
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


WINDOW_AT_10_30 = yaml.safe_dump(_cluster_doc(), sort_keys=False).replace(
    "  spec:\n", "  spec:\n    changeWindows:\n    - {start: 10:30, duration: 2h}\n", 1
)

# Odd input the API server accepts is decided on, not refused.
ODD: list[tuple[str, object, str]] = [
    (
        # status.stateSerial has no minimum in the CRD; DecideOp reads it as "not applied".
        "a negative status.stateSerial",
        _with(lambda d: d["objects"][0]["status"].update(stateSerial=-1)),
        "InputsChanged",
    ),
    (
        "optional spec sections null or absent",
        _with(
            lambda d: d["objects"][0]["spec"].update(
                variables=None, variablesFrom=None, drift=None, changeWindows=None
            )
        ),
        "InputsChanged",
    ),
    (
        # Unquoted, YAML 1.1 reads 10:30 as the base-60 number 630; kubectl sends "10:30".
        "an unquoted window start",
        WINDOW_AT_10_30,
        "InputsChanged",
    ),
]


@pytest.mark.parametrize(("doc", "reason"), [o[1:] for o in ODD], ids=[o[0] for o in ODD])
def test_odd_input_the_api_accepts_is_decided_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: object, reason: str
) -> None:
    status, out, err = _decide(capsys, _write(tmp_path, doc))
    assert (status, err) == (0, "")
    assert orjson.loads(out)["reason"] == reason


FLAGS: list[tuple[str, list[str], str]] = [
    ("no run slots", ["--max-concurrent-runs", "0"], "--max-concurrent-runs must be at least 1"),
    ("--now beside a file", ["--now", "yesterday"], "--now goes with --live"),
]


@pytest.mark.parametrize(("extra", "says"), [f[1:] for f in FLAGS], ids=[f[0] for f in FLAGS])
def test_bad_flags_are_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    status, out, err = _decide(capsys, _write(tmp_path, SHAPES[0][1]), *extra)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1
    assert says in err


def test_live_without_a_usable_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = _write(tmp_path, {"apiVersion": "v1", "kind": "Config", "clusters": []})
    status = main(["decide", "--live", "tfc/c1", "--kubeconfig", str(kubeconfig)])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err.startswith("captf decide: no cluster to read from:")
    assert err.count("\n") == 1


# The controller's path (no file checks): a spec field of the wrong type is JobPolicyInvalid,
# never an exception out of DecideOp, and never a string "false" read as true.
POLICY: list[tuple[str, Json]] = [
    ("guard.allowDestructive as a string", {"guard": {"allowDestructive": "false"}}),
    ("drift.remediate as a string", {"drift": {"remediate": "false"}}),
    ("drift as a string", {"drift": "1h"}),
    ("approval as a string", {"approval": "Manual"}),
    ("jobs as a string", {"jobs": "captf:dev"}),
    ("serviceAccountName as a number", {"jobs": {"image": "i", "serviceAccountName": 5}}),
]


@pytest.mark.parametrize("spec", [p[1] for p in POLICY], ids=[p[0] for p in POLICY])
def test_a_wrongly_typed_policy_is_job_policy_invalid(spec: Json) -> None:
    obj = captf(spec=spec)
    if isinstance(spec.get("jobs"), str):
        obj["spec"]["jobs"] = spec["jobs"]
    assert decided(obj, base_objects()) == {
        "action": "requeue",
        "reason": "JobPolicyInvalid",
        "after": 600.0,
    }


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


def test_dash_reads_the_snapshot_from_standard_input(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("captf")
    text = _write(tmp_path, SHAPES[0][1]).read_text()
    done = subprocess.run(
        [str(script), "decide", "-f", "-"], input=text, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert orjson.loads(done.stdout) == SHAPES[0][2]
    garbage = subprocess.run(
        [str(script), "decide", "-f", "-"], input=b"\xff", capture_output=True, check=False
    )
    assert (garbage.returncode, garbage.stdout) == (2, b"")
    assert garbage.stderr == b"captf decide: - is not UTF-8 text\n"


LOOSE = """\
now: 2026-06-01T12:00:00Z
objects:
- apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
  kind: TerraformCluster
  metadata:
    name: c1
    annotations: {{captf.io/restore-serial: 4}}
    ownerReferences: [{{apiVersion: cluster.x-k8s.io/v1beta2, kind: Cluster, name: c1}}]
  spec:
    source: {{configMapRef: {{name: mod}}}}
    variables: {{size: 3}}
    variablesFrom: [{{secretRef: {{name: vars}}}}]
    jobs: {{image: captf:dev}}
    drift: {{interval: 30s}}
  status: {{lastRestoredSerial: 4}}
- kind: ConfigMap
  metadata: {{name: mod}}
  data: {{main.tf: ""}}
- kind: Cluster
  metadata: {{name: c1}}
  spec: {{infrastructureRef: {{kind: TerraformCluster, name: c1}}}}
- kind: Secret
  metadata: {{name: vars}}
  stringData: {{owner: me}}
- kind: Secret
  metadata:
    name: c1-state
    labels: {{captf.io/kind: TerraformCluster, captf.io/name: c1}}
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
    # The 30s interval is read as the 1m floor: the failed check (read as failed, not
    # running) is due again a minute after it, in 30 s.
    assert orjson.loads(out) == {"action": "idle", "after": 30.0}


def test_a_v1alpha1_object_is_read_as_the_controller_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its credentialsRef is the identityRef of kind Secret the conversion webhook makes of
    it: a missing Secret is waited for, as for a v1beta1 object naming it."""
    spec = {"identityRef": None, "credentialsRef": {"name": "gone"}}
    old = captf(spec=spec) | {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1"}
    new = captf(spec={"identityRef": {"kind": "Secret", "name": "gone"}})
    answers = []
    for obj in (old, new):
        status, out, err = _decide(capsys, _write(tmp_path, _snapshot(obj, base_objects())))
        assert (status, err) == (0, "")
        answers.append(orjson.loads(out))
    assert answers[0]["reason"] == "CredentialsNotReady"
    assert answers[0] == answers[1]
