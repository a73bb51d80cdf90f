"""Reading a module directory's .tf and .tf.json files into the facts the rules read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.lint.module_facts import ModuleFacts, ProviderArgument, Where
from controller.lint.module_files import ModuleUnreadable, read_module

VARIABLES = """\
# The contract's inputs.
variable "captf_tags" {
  type = map(string)
}

variable "network" {
  type = object({
    pods  = optional(list(string), [])
    label = optional(string, "N/A (none)")
  })
  default = null
}

variable "bootstrap_data" {
  type      = string
  sensitive = true
}

variable "untyped" {}

variable "legacy" {
  type    = "string"
  default = "x"
}
"""

MAIN = """\
terraform {
  required_version = ">= 1.6"
  backend "s3" {
    bucket = "state"
  }
}

terraform {
  cloud {}
}

provider "aws" {
  access_key = "AKIAEXAMPLE"
  token      = var.token
  region     = ""
  assume_role {
    secret = "literal"
  }
}

locals {
  # var.in_a_comment is not a reference
  script = <<-EOT
    echo ${var.in_heredoc}
  EOT
}

resource "terraform_data" "x" {
  input = { tags = var.captf_tags, name = "n-${var.name}" }
}

output "health" {
  value = { state = "running" }
}
"""


def read(tmp_path: Path, **files: str) -> ModuleFacts:
    for name, text in files.items():
        (tmp_path / name.replace("__", ".")).write_text(text)
    return read_module(tmp_path)


def test_variables_with_their_types_and_lines(tmp_path: Path) -> None:
    facts = read(tmp_path, variables__tf=VARIABLES)
    by_name = {v.name: v for v in facts.variables}
    assert [v.name for v in facts.variables] == [
        "captf_tags",
        "network",
        "bootstrap_data",
        "untyped",
        "legacy",
    ]
    assert by_name["captf_tags"].type == "map(string)"
    assert by_name["captf_tags"].where == Where("variables.tf", 2)
    assert by_name["network"].has_default
    assert "optional(list(string), [])" in (by_name["network"].type or "")
    assert by_name["bootstrap_data"].sensitive
    assert by_name["bootstrap_data"].where.line == 14
    assert by_name["untyped"].type is None
    assert not by_name["untyped"].has_default
    assert by_name["legacy"].type == "string"


def test_blocks_providers_and_references(tmp_path: Path) -> None:
    facts = read(tmp_path, main__tf=MAIN)
    assert facts.backends == (Where("main.tf", 1),)
    assert facts.clouds == (Where("main.tf", 8),)
    assert [o.name for o in facts.outputs] == ["health"]
    assert facts.outputs[0].where.line == 32
    literals = {a.name: a.literal for a in facts.provider_arguments}
    assert literals == {"access_key": True, "token": False, "region": False, "secret": True}
    assert facts.provider_arguments[0] == ProviderArgument(
        "aws", "access_key", True, Where("main.tf", 12)
    )
    assert facts.referenced == {"token", "in_heredoc", "captf_tags", "name"}


def test_a_variable_read_only_in_variable_blocks_is_not_referenced(tmp_path: Path) -> None:
    facts = read(
        tmp_path,
        variables__tf='variable "a" {\n  default = "x"\n  validation {\n'
        '    condition     = var.captf_tags != null\n    error_message = "no"\n  }\n}\n',
    )
    assert facts.referenced == frozenset()


def test_json_syntax(tmp_path: Path) -> None:
    document = {
        "variable": {
            "captf_tags": {"type": "map(string)"},
            "bootstrap_data": {"type": "string", "sensitive": True},
            "size": {"default": None},
        },
        "output": {"health": {"value": "${var.captf_tags}"}},
        "terraform": [{"backend": {"local": {}}}],
        "provider": {"aws": [{"secret_key": "x"}, {"alias": "b", "token": "${var.t}"}]},
    }
    facts = read(tmp_path, main__tf__json=json.dumps(document))
    by_name = {v.name: v for v in facts.variables}
    assert by_name["captf_tags"].type == "map(string)"
    assert by_name["captf_tags"].where == Where("main.tf.json")
    assert by_name["bootstrap_data"].sensitive
    assert by_name["size"].has_default
    assert by_name["size"].type is None
    assert [o.name for o in facts.outputs] == ["health"]
    assert facts.backends == (Where("main.tf.json"),)
    literals = {a.name: a.literal for a in facts.provider_arguments}
    assert literals == {"secret_key": True, "alias": True, "token": False}
    assert facts.referenced == {"captf_tags", "t"}


def test_files_of_both_syntaxes_and_nothing_below(tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "x.tf").write_text('variable "hidden" {}\n')
    (tmp_path / "notes.txt").write_text("variable {")
    facts = read(
        tmp_path,
        a__tf='variable "a" {\n  default = 1\n}\n',
        b__tf__json='{"variable": {"b": {"default": 2}}}',
    )
    assert [v.name for v in facts.variables] == ["a", "b"]


@pytest.mark.parametrize(
    ("files", "file", "line"),
    [
        (
            {"main.tf": 'variable "a" {\n  type = string\n}\n\nvariable "b" {\n  type = = x\n}\n'},
            "main.tf",
            6,
        ),
        ({"main.tf": 'variable "a" {\n  type = string\n'}, "main.tf", 3),
        ({"main.tf": 'variable "a" {}\n@@\n'}, "main.tf", 2),
        ({"main.tf.json": '{\n  "variable": {\n    "a": \n}'}, "main.tf.json", 4),
        ({"main.tf.json": "[1, 2]"}, "main.tf.json", 1),
    ],
)
def test_what_does_not_parse_is_named_with_file_and_line(
    tmp_path: Path, files: dict[str, str], file: str, line: int
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ModuleUnreadable) as raised:
        read_module(tmp_path)
    assert (raised.value.file, raised.value.line) == (file, line)
    assert raised.value.message.startswith("not")


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_bytes(b'variable "\xff" {}\n')
    with pytest.raises(ModuleUnreadable, match="UTF-8") as raised:
        read_module(tmp_path)
    assert raised.value.file == "main.tf"


def test_no_module_files_or_no_directory(tmp_path: Path) -> None:
    with pytest.raises(ModuleUnreadable, match=r"no \.tf or \.tf\.json file"):
        read_module(tmp_path)
    with pytest.raises(ModuleUnreadable, match="not a directory"):
        read_module(tmp_path / "missing")
