"""User variable names the controller keeps for itself.

Every module: the `captf_` prefix (the contract's, whatever the module declares) and
the names Terraform reserves for module meta-arguments (`count`, `source`, ...). A
module image is always a role module, so its role's contract inputs are reserved too,
and a name must be a Terraform identifier. A module from a ConfigMap may be a root of
its own (written before the contract) whose variables the contract does not own; the
controller, which reads the module, refuses a contract name for it at reconcile
(VariablesRefused)."""

from __future__ import annotations

from collections.abc import Iterator

from controller.core.admission.refusal import Refusal
from controller.core.contract import variables
from controller.core.contract.roles import META_ARGUMENTS, RESERVED_PREFIX, Role
from runtime.jsonobj import Json


def user_variable_names(spec: Json) -> Iterator[tuple[str, str]]:
    """(field path, variable name) of every name a spec gives a variable by itself:
    the keys of `variables` and the `key` of a `variablesFrom` entry (an entry without
    one takes every key of its Secret or ConfigMap, unknown here)."""
    given = spec.get("variables")
    if isinstance(given, dict):
        for name in given:
            yield f"variables.{name}", str(name)
    sources = spec.get("variablesFrom")
    for i, entry in enumerate(sources if isinstance(sources, list) else []):
        for ref in ("secretRef", "configMapRef"):
            key = (entry.get(ref) or {}).get("key") if isinstance(entry, dict) else None
            if isinstance(key, str) and key:
                yield f"variablesFrom[{i}].{ref}.key", key


def _rule(name: str, role: Role | None, role_module: bool) -> str | None:
    if role is not None and role_module:
        refused = variables.refusal_of(name, role)
        return None if refused is None else f"variable {name!r} {refused.why}"
    if name.startswith(RESERVED_PREFIX):
        return f"variable {name!r} uses the reserved prefix {RESERVED_PREFIX!r}"
    if name in META_ARGUMENTS:
        return f"variable {name!r} is a module meta-argument"
    return None


def refusals(spec: Json, role: Role | None, prefix: str = "spec") -> list[Refusal]:
    """A refusal for each reserved user variable name of `spec` (at path `prefix`)."""
    source = spec.get("source")
    role_module = isinstance(source, dict) and bool(source.get("image"))
    found = []
    for path, name in user_variable_names(spec):
        rule = _rule(name, role, role_module)
        if rule is not None:
            found.append(Refusal(f"{prefix}.{path}", rule))
    return found
