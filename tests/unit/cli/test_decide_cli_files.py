"""`captf decide -f` on what an operator may hand it: annotations the API server stores
as free text, files made to be expensive, several files at once.

Anything the API server can store is decided as the controller decides it; what is not a
Kubernetes object, or is built to take minutes to read, is one line on stderr and exit
status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cli import api_yaml
from controller.cli.main import main
from controller.cli.snapshot_file import load
from controller.core.basics.names import ANN_RESTORE_SERIAL
from controller.core.decide.triggers import jitter
from runtime.jsonobj import Json
from tests.builders import NOW, ago, base_objects, captf, decided, job, ts
from tests.paths import REPO

ROOT = REPO


def _doc(obj: Json, others: list[Json]) -> Json:
    return {"now": ts(NOW), "objects": [obj, *others]}


def _write(tmp_path: Path, doc: object, name: str = "snap.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def _decide(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["decide", *args])
    out, err = capsys.readouterr()
    return status, out, err


# -- the restore request: free text to the API server --------------------------------


@pytest.mark.parametrize(
    "serial",
    [
        "",  # `kubectl annotate ... captf.io/restore-serial=` stores the empty string
        "abc",
        "-1",
        " 3",
        "3.0",
        "+4",
        "\u0664",  # ARABIC-INDIC DIGIT FOUR: int() reads it, no serial is written so
    ],
)
@pytest.mark.parametrize("variables", [{"size": 3}, {"size": 4}])
def test_a_restore_serial_that_is_no_serial_is_decided_as_the_controller_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], serial: str, variables: Json
) -> None:
    # Before: exit 2, "annotation captf.io/restore-serial is not a serial". The controller
    # reads it as no request and goes on with the rest of DecideOp: idle here, or the
    # apply of new inputs.
    obj = captf(annotations={ANN_RESTORE_SERIAL: serial}, spec={"variables": variables})
    status, out, err = _decide(capsys, "-f", str(_write(tmp_path, _doc(obj, base_objects()))))
    assert (status, err) == (0, "")
    assert orjson.loads(out) == decided(obj, base_objects())
    assert orjson.loads(out)["action"] == ("idle" if variables == {"size": 3} else "run")


def test_an_unquoted_restore_serial_of_3_0_is_the_text_the_api_would_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # YAML reads 3.0 as a float; the API server stores the annotation as "3.0".
    text = yaml.safe_dump(_doc(captf(), base_objects()), sort_keys=False).replace(
        "  metadata:\n", f"  metadata:\n    annotations:\n      {ANN_RESTORE_SERIAL}: 3.0\n", 1
    )
    status, out, err = _decide(capsys, "-f", str(_write(tmp_path, text)))
    assert (status, err, orjson.loads(out)) == (0, "", {"action": "idle"})


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"now": ts(NOW), "objects": [{"metadata": {"name": "c1"}}]}, "unknown kind None"),
        ({"now": ts(NOW), "objects": [{"kind": "TerraformCluster"}]}, "has no metadata.name"),
        (
            _doc(captf() | {"spec": ["not", "a", "mapping"]}, []),
            "TerraformCluster/c1 has no spec",
        ),
        (
            _doc(captf(spec={"jobs": {"failedJobsHistoryLimit": "3"}}), []),
            "spec.jobs.failedJobsHistoryLimit is not an integer",
        ),
    ],
)
def test_what_is_not_a_kubernetes_object_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Json, says: str
) -> None:
    status, out, err = _decide(capsys, "-f", str(_write(tmp_path, doc)))
    assert (status, out) == (2, "")
    assert err.startswith("captf decide:")
    assert err.count("\n") == 1
    assert says in err


# -- files built to be expensive ---------------------------------------------------------


def _bomb(levels: int, width: int = 10) -> str:
    """The classic alias bomb, shaped as a snapshot: `width ** levels` strings in the
    cluster's variables from a file of a few hundred bytes."""
    lines = [f"x0: &x0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"x{level}: &x{level} [{', '.join([f'*x{level - 1}'] * width)}]")
    doc = yaml.safe_dump(_doc(captf(spec={"variables": {"size": 4}}), base_objects()))
    doc = doc.replace("      size: 4\n", f"      size: 4\n      bomb: *x{levels - 1}\n", 1)
    return "\n".join(lines) + "\n" + doc


def test_an_alias_bomb_is_refused_before_it_is_expanded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: expanded (10**6 strings here; about 840 MB and 20 s for the file)
    # and decided on.
    path = _write(tmp_path, _bomb(levels=6))
    status, out, err = _decide(capsys, "-f", str(path))
    assert (status, out) == (2, "")
    assert err == (
        f"captf decide: {path}: a YAML alias at line 5 expands the file too far"
        " (API objects need no aliases)\n"
    )


def test_an_alias_inside_its_own_anchor_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, f"now: '{ts(NOW)}'\nobjects: &objects [*objects]\n")
    status, out, err = _decide(capsys, "-f", str(path))
    assert (status, out) == (2, "")
    assert "refers to a node that contains it" in err


def test_a_few_aliases_as_pyyaml_writes_them_are_read() -> None:
    # yaml.dump shares a repeated mapping as &id001/*id001 (examples/snapshots/11 does):
    # a bounded expansion, read as the objects it stands for.
    shared = {"name": "example", "size": 1}
    text = yaml.safe_dump({"a": shared, "b": [shared, shared]})
    assert "*id001" in text
    assert api_yaml.load(text) == {"a": shared, "b": [shared, shared]}


def test_nesting_past_the_parsers_limit_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "now: x\nobjects: " + "[" * 50_000 + "]" * 50_000 + "\n")
    status, out, err = _decide(capsys, "-f", str(path))
    assert (status, out) == (2, "")
    assert err == f"captf decide: {path} is nested too deeply to read\n"


def test_a_snapshot_of_many_jobs_is_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1,500 Jobs, 1 MB: seconds in pure-Python YAML (docs/decide.md has the numbers).
    jobs = [
        job("drift", seq, "succeeded", finished=ago(seconds=10 * seq)) for seq in range(1, 1501)
    ]
    obj = captf(spec={"drift": {"interval": "1h"}})
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # writing it is not under test
    text = yaml.dump(_doc(obj, [*base_objects(), *jobs]), Dumper=dumper, sort_keys=False)
    status, out, _ = _decide(capsys, "-f", str(_write(tmp_path, text)))
    assert (status, orjson.loads(out)) == (
        0,
        {"action": "idle", "after": 3590.0 + jitter("uid-c1", "drift", 3600)},
    )


# -- the same typing rules with either parser ----------------------------------------------

SCALARS = [
    "2026-01-01",
    "2026-01-01T10:00:00Z",
    "10:30",
    "1:02:03",
    "190:20:30",
    "1_000",
    "0x1F",
    "0o17",
    "017",
    "1e3",
    "1.5e3",
    "-.inf",
    ".NaN",
    "yes",
    "No",
    "on",
    "OFF",
    "~",
    "null",
    "",
    "true",
    "3.0",
    "+4",
    "-0",
    "=",
    "<<",
]


def _read(text: str, loader: api_yaml.Loader) -> object:
    """The value read, or the name of the error raised (`=` and `<<` are tags that no
    safe constructor builds)."""
    try:
        return api_yaml.load(text, loader)
    except yaml.YAMLError as err:
        return type(err).__name__


@pytest.mark.parametrize("scalar", SCALARS)
def test_both_parsers_type_a_scalar_alike(scalar: str) -> None:
    text = f"plain: {scalar}\nquoted: '{scalar}'\nlisted: [{scalar}]\n"
    fast = _read(text, api_yaml.FastLoader)
    # repr: NaN is not equal to itself. No datetime: JSON has no time type.
    assert repr(fast) == repr(_read(text, api_yaml.PurePythonLoader))
    assert "datetime" not in repr(fast)


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(SCALARS),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSONISH, st.sampled_from([None, True]))
def test_both_parsers_read_any_document_alike(value: object, flow: bool | None) -> None:
    text = yaml.safe_dump({"v": value}, default_flow_style=flow)
    assert api_yaml.load(text) == api_yaml.load(text, api_yaml.PurePythonLoader)


def test_the_fast_parser_is_libyaml_where_pyyaml_has_it() -> None:
    if yaml.__with_libyaml__:
        assert issubclass(api_yaml.FastLoader, yaml.CSafeLoader)


# -- several files ----------------------------------------------------------------------------


def _three(tmp_path: Path) -> list[Path]:
    idle = _write(tmp_path, _doc(captf(), base_objects()), "a.yaml")
    run = _write(tmp_path, _doc(captf(spec={"variables": {"size": 4}}), base_objects()), "b.yaml")
    bad = _write(tmp_path, "now: [\n", "c.yaml")
    return [idle, run, bad]


IDLE = '{"action":"idle"}'
RUN = '{"action":"run","op":"apply","reason":"InputsChanged","retry":1}'


def test_several_files_print_one_line_each_prefixed_with_the_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, _ = _three(tmp_path)
    status, out, err = _decide(capsys, "-f", str(a), str(b))
    assert (status, err) == (0, "")
    assert out == f"{a}: {IDLE}\n{b}: {RUN}\n"
    # -f repeated, as kubectl takes it, is the same.
    assert _decide(capsys, "-f", str(a), "-f", str(b)) == (0, out, "")


def test_one_file_prints_the_bare_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _, _ = _three(tmp_path)
    assert _decide(capsys, "-f", str(a)) == (0, IDLE + "\n", "")


def test_a_bad_file_among_several_is_its_own_line_and_the_rest_are_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, bad = _three(tmp_path)
    missing = tmp_path / "gone.yaml"
    status, out, err = _decide(capsys, "-f", str(a), str(bad), str(missing), str(b))
    assert status == 2
    assert out == f"{a}: {IDLE}\n{b}: {RUN}\n"
    assert err.splitlines() == [
        f"captf decide: {bad} is not valid YAML at line 2",
        f"captf decide: cannot read {missing}: No such file or directory",
    ]


def test_a_shell_glob_over_the_examples(tmp_path: Path) -> None:
    # `captf decide -f examples/snapshots/*.yaml`: one line per example, in order, each the
    # decision its `expect:` states.
    examples = sorted((ROOT / "examples" / "snapshots").glob("*.yaml"))
    done = subprocess.run(
        f"{sys.executable} -m controller.cli.main decide -f examples/snapshots/*.yaml",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [
        str(p.relative_to(ROOT)) for p in examples
    ]
    for line, path in zip(lines, examples, strict=True):
        expect = yaml.safe_load(path.read_text())["expect"]
        assert orjson.loads(line.split(": ", 1)[1]) == expect


def test_standard_input_is_read_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _decide(capsys, "-f", "-", "-")
    assert (status, out) == (2, "")
    assert "standard input (-) can be read only once" in err


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")
def test_snapshot_files_are_read_with_the_libyaml_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Several times faster than the pure-Python parser on a large file (docs/decide.md).
    used: list[type] = []
    compose = api_yaml.FastLoader.get_single_node

    def spy(self: api_yaml.FastLoader) -> Any:
        used.append(type(self))
        return compose(self)

    monkeypatch.setattr(api_yaml.FastLoader, "get_single_node", spy)
    load(str(_write(tmp_path, _doc(captf(), base_objects()))))
    assert len(used) == 1
    assert issubclass(used[0], yaml.CSafeLoader)
