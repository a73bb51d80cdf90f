"""The providers a module requires, named and implied, through its local modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.lint.module_files import ModuleUnreadable
from controller.lint.providers import TERRAFORM_REGISTRY, required_providers

OT = "registry.opentofu.org"


def write(directory: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return directory


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('resource "terraform_data" "x" {}', set()),
        ('resource "local_file" "x" {}', {f"{OT}/hashicorp/local"}),
        ('data "null_data_source" "x" {}', {f"{OT}/hashicorp/null"}),
        ('provider "google" {}', {f"{OT}/hashicorp/google"}),
        ('resource "terraform_data" "x" {\n  provider = aws.west\n}', {f"{OT}/hashicorp/aws"}),
        (
            'terraform {\n  required_providers {\n    mine = { source = "Example.com/Acme/Mine" }\n'
            '  }\n}\nresource "mine_thing" "x" {}',
            {"example.com/acme/mine"},
        ),
        (
            'terraform {\n  required_providers {\n    local = { source = "hashicorp/local" }\n'
            "  }\n}",
            {f"{OT}/hashicorp/local"},
        ),
    ],
    ids=["builtin", "resource", "data", "provider-block", "provider-argument", "named", "unused"],
)
def test_named_and_implied_providers(tmp_path: Path, text: str, expected: set[str]) -> None:
    assert required_providers(write(tmp_path, {"main.tf": text})) == expected


def test_local_modules_are_followed_each_with_its_own_names(tmp_path: Path) -> None:
    write(
        tmp_path / "mod",
        {
            "main.tf": 'module "net" {\n  source = "./net"\n}\nmodule "r" {\n'
            '  source = "hashicorp/consul/aws"\n}\nmodule "out" {\n  source = "../outside"\n}',
            "net/main.tf": "terraform {\n  required_providers {\n    aws = {\n"
            '      source = "registry.terraform.io/hashicorp/aws"\n    }\n  }\n}\n'
            'resource "aws_vpc" "v" {}\nmodule "back" {\n  source = "../"\n}',
            "extra.tf.json": '{"resource": {"random_id": {"x": {}}}}',
        },
    )
    write(tmp_path / "outside", {"main.tf": 'resource "google_x" "y" {}'})
    assert required_providers(tmp_path / "mod") == {
        f"{TERRAFORM_REGISTRY}/hashicorp/aws",
        f"{OT}/hashicorp/random",
    }


def test_the_default_host_is_the_callers(tmp_path: Path) -> None:
    module = write(tmp_path, {"main.tf": 'resource "local_file" "x" {}'})
    assert required_providers(module, host=TERRAFORM_REGISTRY) == {
        f"{TERRAFORM_REGISTRY}/hashicorp/local"
    }


def test_a_module_that_does_not_parse_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ModuleUnreadable):
        required_providers(write(tmp_path, {"main.tf": "resource {"}))
