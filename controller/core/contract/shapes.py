"""The shapes of the contract's output values, checked against the Cluster API fields
they are written to.

Each check takes a JSON value as decoded from the state and returns the typed value,
or raises Violation saying why it cannot be written. The limits are the CRD markers of
the target fields, so a value that passes is one the API server accepts. A check never
sees null: what null means is the role's business (outputs.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ADDRESS_TYPES = ("InternalIP", "InternalDNS", "ExternalIP", "ExternalDNS", "Hostname")
HEALTH_STATES = frozenset({"pending", "running", "degraded", "stopped", "terminated", "unknown"})

PROVIDER_ID_MAX = 512
HOST_MAX = 512
NAME_MAX = 256  # failure-domain names and addresses
FAILURE_DOMAINS_MAX = 100
ADDRESSES_MAX = 256
PROVIDER_IDS_MAX = 10000


class Violation(ValueError):
    """A value of the wrong shape; the message says what is wrong, not where."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True)
class FailureDomain:
    name: str
    control_plane: bool = True
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, order=True)
class Address:
    type: str
    address: str


@dataclass(frozen=True)
class Health:
    state: str
    healthy: bool = False
    message: str | None = None
    reasons: tuple[str, ...] = ()


def kind_of(value: object) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object"


def text(value: object, *, limit: int, what: str = "a string") -> str:
    if not isinstance(value, str):
        raise Violation(f"must be {what}, got {kind_of(value)}")
    if not 1 <= len(value) <= limit:
        raise Violation(f"must be 1 to {limit} characters, got {len(value)}")
    return value


def integer(value: object, *, low: int, high: int | None = None) -> int:
    """A JSON number with an integral value in [low, high]; bools are not numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Violation(f"must be a number, got {kind_of(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise Violation(f"must be a whole number, got {value}")
    number = int(value)
    if number < low or (high is not None and number > high):
        bound = f"{low} to {high}" if high is not None else f"at least {low}"
        raise Violation(f"must be {bound}, got {number}")
    return number


def obj(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise Violation(f"must be an object, got {kind_of(value)}")
    return value


def items(value: object, *, limit: int) -> list[Any]:
    if not isinstance(value, list):
        raise Violation(f"must be a list, got {kind_of(value)}")
    if len(value) > limit:
        raise Violation(f"must have at most {limit} entries, got {len(value)}")
    return value


def at(index: int, check: Any, value: object) -> Any:
    """`check(value)`, with the entry's index in the message of a violation."""
    try:
        return check(value)
    except Violation as exc:
        raise Violation(f"entry {index}: {exc}") from None


def attribute(mapping: Mapping[str, Any], name: str, check: Any) -> Any:
    try:
        return check(mapping.get(name))
    except Violation as exc:
        raise Violation(f"{name} {exc}") from None


def endpoint(value: object) -> Endpoint | None:
    """An APIEndpoint: host and port both set, or both unset (None). Half of one is not
    written: CAPI copies an endpoint only once both are set."""
    mapping = obj(value)
    host, port = mapping.get("host"), mapping.get("port")
    if host in (None, "") and port in (None, 0):
        return None
    if host in (None, "") or port in (None, 0):
        raise Violation("must set both host and port, or neither")
    return Endpoint(
        host=attribute(mapping, "host", lambda v: text(v, limit=HOST_MAX)),
        port=attribute(mapping, "port", lambda v: integer(v, low=1, high=65535)),
    )


def failure_domains(value: object) -> tuple[FailureDomain, ...]:
    entries = items(value, limit=FAILURE_DOMAINS_MAX)
    domains = tuple(at(i, _failure_domain, entry) for i, entry in enumerate(entries))
    names = [domain.name for domain in domains]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise Violation(f"names must be unique, repeated: {', '.join(duplicated)}")
    return domains


def _failure_domain(value: object) -> FailureDomain:
    mapping = obj(value)
    name = attribute(mapping, "name", lambda v: text(v, limit=NAME_MAX))
    control_plane = mapping.get("control_plane")
    if control_plane is not None and not isinstance(control_plane, bool):
        raise Violation(f"control_plane must be a bool, got {kind_of(control_plane)}")
    attributes = mapping.get("attributes") or {}
    attrs = obj(attributes)
    if not all(isinstance(v, str) for v in attrs.values()):
        raise Violation("attributes must be a map of strings")
    # Our default: CAPI's control-plane providers only use domains that say true.
    return FailureDomain(name, True if control_plane is None else control_plane, dict(attrs))


def addresses(value: object) -> tuple[Address, ...]:
    """Addresses in canonical order: by type precedence, then by address, so the first
    InternalIP (what some bootstrap providers register) never depends on module order."""
    entries = items(value, limit=ADDRESSES_MAX)
    found = [at(i, _address, entry) for i, entry in enumerate(entries)]
    return tuple(sorted(found, key=lambda a: (ADDRESS_TYPES.index(a.type), a.address)))


def _address(value: object) -> Address:
    mapping = obj(value)
    kind = mapping.get("type")
    if kind not in ADDRESS_TYPES:
        raise Violation(f"type must be one of {', '.join(ADDRESS_TYPES)}, got {kind!r}")
    return Address(kind, attribute(mapping, "address", lambda v: text(v, limit=NAME_MAX)))


def health(value: object) -> Health:
    mapping = obj(value)
    state = mapping.get("state")
    if state not in HEALTH_STATES:
        raise Violation(f"state must be one of {', '.join(sorted(HEALTH_STATES))}, got {state!r}")
    healthy = mapping.get("healthy")
    if healthy is not None and not isinstance(healthy, bool):
        raise Violation(f"healthy must be a bool, got {kind_of(healthy)}")
    message = mapping.get("message")
    if message is not None and not isinstance(message, str):
        raise Violation(f"message must be a string, got {kind_of(message)}")
    reasons = mapping.get("reasons") or []
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise Violation("reasons must be a list of strings")
    return Health(str(state), healthy is True, message, tuple(reasons))


def provider_id(value: object) -> str:
    return text(value, limit=PROVIDER_ID_MAX)
