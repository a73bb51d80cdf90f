"""What the linter knows of a role module: the declarations its checks read, each with
where it was written. A reader of `.tf` and `.tf.json` files builds these; the checks
(`lint.py`) read nothing else, so they stay pure and testable without files."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Where:
    # The file's name relative to the module directory.
    file: str
    # 1-based; None where the syntax keeps no line (JSON files).
    line: int | None = None


@dataclass(frozen=True)
class Variable:
    name: str
    where: Where
    # The type constraint's expression text; None when the declaration has none.
    type: str | None = None
    has_default: bool = False
    sensitive: bool = False


@dataclass(frozen=True)
class Output:
    name: str
    where: Where


@dataclass(frozen=True)
class ProviderArgument:
    """One argument set in a `provider` block, at any depth of its nested blocks and
    objects. `literal` is true when the value is a non-empty string written out in the
    source, not computed from a reference or a function."""

    provider: str
    name: str
    literal: bool
    where: Where


@dataclass(frozen=True)
class ModuleFacts:
    variables: tuple[Variable, ...] = ()
    outputs: tuple[Output, ...] = ()
    # Where a `terraform` block holds a `backend` block, or a `cloud` block.
    backends: tuple[Where, ...] = ()
    clouds: tuple[Where, ...] = ()
    provider_arguments: tuple[ProviderArgument, ...] = ()
    # Every `var.NAME` read anywhere outside the `variable` blocks.
    referenced: frozenset[str] = frozenset()

    def variable(self, name: str) -> Variable | None:
        return next((v for v in self.variables if v.name == name), None)
