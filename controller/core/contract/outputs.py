"""The contract outputs of a root, decoded into what the controller writes back.

The null semantics of the contract:
- absent (the module does not declare it): Missing, a hard error until the module
  changes. The state cannot show it: Terraform and OpenTofu keep no null root output
  in the state (nor print one in `tofu output -json`), so in a state an absent output
  is a null one. An undeclared output shows instead as the plan failing on the root's
  re-export of it; `missing_outputs` reads that failure;
- of the wrong shape: Invalid, naming the output and why; nothing is written;
- null where a value is still to come: Pending, keep waiting (provider_id, health, and
  the pool's membership); null where the contract gives it a meaning: that meaning
  (no endpoint, no failure domains, exports {}, not interruptible, no group id).

Decoding is total: any JSON value of any output gives Valid, Pending or Invalid, and a
state that holds none of the outputs (no apply yet, or not a contract root) is Pending,
never provisioned."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from controller.core.contract import shapes
from controller.core.contract.roles import Role, contract_of
from controller.core.contract.shapes import Address, Endpoint, FailureDomain, Health, Violation

# Status stays under the API server's request limit; the rest are left out, and said so.
INSTANCES_MAX = 1000


@dataclass(frozen=True)
class ClusterOutputs:
    control_plane_endpoint: Endpoint | None
    failure_domains: tuple[FailureDomain, ...]  # null and [] both clear the field
    exports: Any
    health: Health | None


@dataclass(frozen=True)
class MachineOutputs:
    provider_id: str | None
    addresses: tuple[Address, ...] | None
    failure_domain: str | None
    interruptible: bool
    health: Health | None


@dataclass(frozen=True)
class Instance:
    provider_id: str
    instance_id: str | None = None
    addresses: tuple[Address, ...] = ()
    failure_domain: str | None = None
    state: str | None = None


@dataclass(frozen=True)
class PoolOutputs:
    provider_id: str | None
    provider_id_list: tuple[str, ...] | None  # sorted, without duplicates
    replicas: int | None
    instances: tuple[Instance, ...] | None
    instances_truncated: bool
    health: Health | None


Outputs = ClusterOutputs | MachineOutputs | PoolOutputs
OutputsT = TypeVar("OutputsT", ClusterOutputs, MachineOutputs, PoolOutputs)


@dataclass(frozen=True)
class Valid(Generic[OutputsT]):
    outputs: OutputsT


@dataclass(frozen=True)
class Pending(Generic[OutputsT]):
    outputs: OutputsT
    waiting: tuple[str, ...]  # the outputs still null

    @property
    def message(self) -> str:
        return f"waiting for output {', '.join(self.waiting)}"


@dataclass(frozen=True)
class Missing:
    names: tuple[str, ...]

    @property
    def message(self) -> str:
        return f"the module declares no output {', '.join(self.names)}"


@dataclass(frozen=True)
class Invalid:
    name: str
    why: str
    reason: str = "OutputsInvalid"

    @property
    def message(self) -> str:
        return f"output {self.name} {self.why}"


Decoded = Valid[Any] | Pending[Any] | Missing | Invalid


def values_of(output_json: Mapping[str, Any]) -> dict[str, Any]:
    """The values of `tofu output -json` (or of a state's `outputs`): {name: {value}}."""
    return {name: entry.get("value") for name, entry in output_json.items()}


# How OpenTofu reports a root output whose module does not declare it.
_UNDECLARED = re.compile(r'does not have an attribute named "([A-Za-z_][A-Za-z0-9_-]*)"')


def missing_outputs(role: Role, error_text: str) -> Missing | None:
    """The contract outputs a failed plan or apply says the role module lacks, or None
    when its failure is about something else."""
    named = set(_UNDECLARED.findall(error_text))
    missing = tuple(name for name in contract_of(role).outputs if name in named)
    return Missing(missing) if missing else None


def decode(
    role: Role, values: Mapping[str, Any], *, requested_failure_domain: str | None = None
) -> Decoded:
    """The outputs of a role's root, from a state or `tofu output -json` (an absent
    output is a null one). `requested_failure_domain` is the machine's failure_domain
    input: the output must equal it when it is set."""
    values = {name: values.get(name) for name in contract_of(role).outputs}
    try:
        if role is Role.CLUSTER:
            return _cluster(values)
        if role is Role.MACHINE:
            return _machine(values, requested_failure_domain)
        return _pool(values)
    except _Bad as bad:
        return bad.invalid


class _Bad(Exception):
    def __init__(self, invalid: Invalid) -> None:
        self.invalid = invalid


def _field(values: Mapping[str, Any], name: str, check: Callable[[Any], Any]) -> Any:
    """`check` of a non-null output; null stays None, for the role to interpret."""
    value = values[name]
    if value is None:
        return None
    try:
        return check(value)
    except Violation as exc:
        raise _Bad(Invalid(name, str(exc))) from None


def _result(outputs: OutputsT, values: Mapping[str, Any], awaited: tuple[str, ...]) -> Decoded:
    waiting = tuple(name for name in awaited if values[name] in (None, ""))
    return Pending(outputs, waiting) if waiting else Valid(outputs)


def _cluster(values: Mapping[str, Any]) -> Decoded:
    outputs = ClusterOutputs(
        control_plane_endpoint=_field(values, "control_plane_endpoint", shapes.endpoint),
        failure_domains=_field(values, "failure_domains", shapes.failure_domains) or (),
        exports={} if values["exports"] is None else values["exports"],
        health=_field(values, "health", shapes.health),
    )
    return _result(outputs, values, ("health",))


def _machine(values: Mapping[str, Any], requested: str | None) -> Decoded:
    placed = _field(values, "failure_domain", _domain_name)
    if requested is not None and placed != requested:
        why = f"is {placed!r}, but the machine was asked for {requested!r}"
        return Invalid("failure_domain", why, reason="FailureDomainMismatch")
    interruptible = values["interruptible"]
    if interruptible is not None and not isinstance(interruptible, bool):
        return Invalid("interruptible", f"must be a bool, got {shapes.kind_of(interruptible)}")
    outputs = MachineOutputs(
        # "" means not yet known, like null.
        provider_id=_field(values, "provider_id", _optional_provider_id),
        addresses=_field(values, "addresses", shapes.addresses),
        failure_domain=placed,
        interruptible=interruptible is True,
        health=_field(values, "health", shapes.health),
    )
    return _result(outputs, values, ("provider_id", "addresses", "health"))


def _pool(values: Mapping[str, Any]) -> Decoded:
    instances = _field(values, "instances", _instances)
    outputs = PoolOutputs(
        provider_id=_field(values, "provider_id", _optional_provider_id),
        provider_id_list=_field(values, "provider_id_list", _provider_ids),
        replicas=_field(values, "replicas", lambda v: shapes.integer(v, low=0)),
        instances=None if instances is None else instances[:INSTANCES_MAX],
        instances_truncated=instances is not None and len(instances) > INSTANCES_MAX,
        health=_field(values, "health", shapes.health),
    )
    return _result(outputs, values, ("provider_id_list", "replicas", "instances", "health"))


def _optional_provider_id(value: object) -> str | None:
    return None if value == "" else shapes.provider_id(value)


def _domain_name(value: object) -> str:
    return shapes.text(value, limit=shapes.NAME_MAX)


def _provider_ids(value: object) -> tuple[str, ...]:
    entries = shapes.items(value, limit=shapes.PROVIDER_IDS_MAX)
    ids = [shapes.at(i, shapes.provider_id, entry) for i, entry in enumerate(entries)]
    return tuple(sorted(set(ids)))


def _instances(value: object) -> tuple[Instance, ...]:
    # Checked in full: a list too long for status is truncated, never invalid.
    entries = shapes.items(value, limit=shapes.PROVIDER_IDS_MAX)
    return tuple(shapes.at(i, _instance, entry) for i, entry in enumerate(entries))


def _instance(value: object) -> Instance:
    mapping = shapes.obj(value)

    def optional(name: str, check: Callable[[Any], Any]) -> Any:
        return None if mapping.get(name) is None else shapes.attribute(mapping, name, check)

    state = mapping.get("state")
    if state is not None and state not in shapes.HEALTH_STATES:
        raise Violation(f"state must be one of the health states, got {state!r}")
    return Instance(
        provider_id=shapes.attribute(mapping, "provider_id", shapes.provider_id),
        instance_id=optional("instance_id", lambda v: shapes.text(v, limit=shapes.NAME_MAX)),
        addresses=optional("addresses", shapes.addresses) or (),
        failure_domain=optional("failure_domain", _domain_name),
        state=state,
    )
