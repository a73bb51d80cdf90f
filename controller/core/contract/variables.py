"""User variables: the module's own variables an object sets beside the contract inputs.

A user variable becomes a named argument of the root's `module "role"` block, so a name
Terraform would read as a meta-argument, or one the controller already passes, would
either break the call or silently replace a contract value. Such names are refused
before anything is rendered; the refusal names every offending variable, so the caller
can show it in a condition and run nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from controller.core.contract.roles import (
    META_ARGUMENTS,
    RESERVED_PREFIX,
    Role,
    contract_of,
)

# Terraform's identifier syntax (a variable name).
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Refusal:
    name: str
    why: str

    @property
    def message(self) -> str:
        return f"user variable {self.name!r} {self.why}"


class VariablesRefused(ValueError):
    """One or more user variables may not be passed to the role module."""

    def __init__(self, refusals: tuple[Refusal, ...]) -> None:
        self.refusals = refusals
        super().__init__(refusal_message(refusals))


def refusal_of(name: str, role: Role) -> Refusal | None:
    """Why this name may not be a user variable of the role, or None when it may."""
    if not IDENTIFIER.fullmatch(name):
        return Refusal(name, "is not a Terraform identifier (letters, digits, _ and -)")
    if name.startswith(RESERVED_PREFIX):
        return Refusal(name, f"uses the reserved prefix {RESERVED_PREFIX!r}")
    if name in contract_of(role).input_names:
        return Refusal(name, f"is a contract input of the {role.value} role")
    if name in META_ARGUMENTS:
        return Refusal(name, "is a module meta-argument")
    return None


def refusals(names: Iterable[str], role: Role) -> tuple[Refusal, ...]:
    """Every refused name, in sorted order so the message is stable."""
    found = (refusal_of(name, role) for name in sorted(set(names)))
    return tuple(refusal for refusal in found if refusal is not None)


def refusal_message(found: tuple[Refusal, ...]) -> str:
    return "; ".join(refusal.message for refusal in found)


def check(names: Iterable[str], role: Role) -> None:
    """Raises VariablesRefused when any name is refused."""
    found = refusals(names, role)
    if found:
        raise VariablesRefused(found)
