"""modules/aws stays lint clean under --strict (warnings count): every contract input and
output of its role declared with a type that takes the contract's, no backend, no
credential in a provider block, a default for every variable a team may set."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from controller.cli.main import main
from controller.lint.providers import required_providers

MODULES = Path(__file__).resolve().parents[2] / "modules" / "aws"


@pytest.mark.parametrize("role", ["cluster", "machine", "machinepool"])
def test_each_role_module_is_lint_clean_under_strict(role: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["lint", "module", str(MODULES / role), "--role", role, "--strict", "--json"])
    assert code == 0, out.getvalue()
    assert json.loads(out.getvalue())["findings"] == []


def test_the_three_modules_require_the_aws_provider_alone() -> None:
    """One provider for the three: their images share one provider layer."""
    found = {
        role: required_providers(MODULES / role) for role in ("cluster", "machine", "machinepool")
    }
    assert set(found.values()) == {frozenset({"registry.opentofu.org/hashicorp/aws"})}
