"""`captf lint module`: the example modules lint clean, and the exit codes and the JSON
document are what docs/lint.md says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.cli.main import main, parser
from controller.lint.image_rules import IMAGE_RULES
from controller.lint.rules import RULES
from tests.paths import REPO

EXAMPLES = REPO / "examples" / "modules"
ROLES = ("cluster", "machine", "machinepool")


@pytest.mark.parametrize("role", ROLES)
def test_the_example_modules_lint_clean(role: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "module", str(EXAMPLES / role), "--role", role, "--strict"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "0 error(s), 0 warning(s)" in err


def test_a_module_linted_for_another_role_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "module", str(EXAMPLES / "machine"), "--role", "cluster"]) == 1
    out, _ = capsys.readouterr()
    assert (
        f"{EXAMPLES / 'machine'}: error input-required: the role's input control_plane_initialized"
        in out
    )


def module_with(tmp_path: Path, extra: str) -> Path:
    """The example machine module plus one more file."""
    for source in (EXAMPLES / "machine").iterdir():
        (tmp_path / source.name).write_text(source.read_text())
    (tmp_path / "extra.tf").write_text(extra)
    return tmp_path


WARNING = 'variable "size" {\n  type = string\n}\n'
ERROR = 'terraform {\n  backend "s3" {}\n}\n'


@pytest.mark.parametrize(
    ("extra", "flags", "code"),
    [
        ("", [], 0),
        (WARNING, [], 0),
        (WARNING, ["--strict"], 1),
        (ERROR, [], 1),
        ('variable "x" {\n  type = \n}\n', [], 2),
    ],
    ids=["clean", "warning", "warning-strict", "error", "unparsable"],
)
def test_exit_codes(
    tmp_path: Path,
    extra: str,
    flags: list[str],
    code: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory = module_with(tmp_path, extra)
    assert main(["lint", "module", str(directory), "--role", "machine", *flags]) == code


def test_human_lines_name_file_line_severity_and_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = module_with(tmp_path, WARNING + ERROR)
    main(["lint", "module", str(directory), "--role", "machine"])
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{directory}/extra.tf:1: warning input-user-variable-default: user variable size has"
        " no default: an object that leaves it unset cannot plan",
        f"{directory}/extra.tf:4: error module-backend: a backend block: the controller owns"
        " the state",
    ]
    assert "1 error(s), 1 warning(s)" in err


def test_an_unparsable_file_is_named_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = module_with(tmp_path, 'variable "x" {\n  type = \n}\n')
    main(["lint", "module", str(directory), "--role", "machine", "--json"])
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"captf lint: {directory}/extra.tf:2: not valid HCL")


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["lint", "module", str(tmp_path), "--role", "pool"])
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:
        main(["lint", "module", str(tmp_path)])
    assert exited.value.code == 2
    assert main(["lint", "module", str(tmp_path / "missing"), "--role", "machine"]) == 2
    assert main(["lint", "module", str(tmp_path), "--role", "machine"]) == 2  # no .tf file


def test_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = module_with(tmp_path, WARNING)
    (directory / "outputs.tf.json").write_text('{"output": {"captf_x": {"value": 1}}}')
    assert main(["lint", "module", str(directory), "--role", "machine", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {
        "module": str(directory),
        "role": "machine",
        "contract": "v1alpha1",
        "findings": [
            {
                "rule": "input-user-variable-default",
                "severity": "warning",
                "file": f"{directory}/extra.tf",
                "line": 1,
                "message": "user variable size has no default: an object that leaves it"
                " unset cannot plan",
            },
            {
                "rule": "output-reserved",
                "severity": "warning",
                "file": f"{directory}/outputs.tf.json",
                "line": None,
                "message": "output captf_x uses the prefix captf_, kept for the contract",
            },
        ],
        "summary": {"errors": 0, "warnings": 2, "failed": False},
    }


def test_a_module_wide_finding_has_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = module_with(tmp_path, "")
    (directory / "main.tf").write_text("")  # the outputs are gone
    assert main(["lint", "module", str(directory), "--role", "machine", "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert {(f["rule"], f["file"], f["line"]) for f in findings} == {
        ("output-required", None, None),
        ("input-tags-unused", f"{directory}/variables.tf", 15),
    }


def test_every_rule_is_documented() -> None:
    text = (REPO / "docs" / "lint.md").read_text()
    for rule in RULES.values():
        assert f"| `{rule.id}` | {rule.severity.value} |" in text


def test_every_image_rule_is_documented() -> None:
    text = (REPO / "docs" / "lint.md").read_text()
    for rule in IMAGE_RULES.values():
        assert f"| `{rule.id}` | {rule.severity.value}" in text


def test_lint_image_takes_a_reference_a_role_and_optionally_a_platform() -> None:
    args = parser().parse_args(["lint", "image", "r.example/m:1", "--role", "machine"])
    assert (args.reference, args.role, args.platform, args.json, args.strict) == (
        "r.example/m:1",
        "machine",
        None,
        False,
        False,
    )
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["lint", "image", "r.example/m:1"])
    assert exited.value.code == 2
