"""The Cluster API fields an input is parsed from, each read one way.

Every function takes plain dicts as the Kubernetes API returns them and never raises,
except on a bootstrap Secret that breaks the bootstrap contract: that is bad input the
caller shows in a condition, and retrying cannot fix it until the Secret changes."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.jsonobj import Json

BOOTSTRAP_VALUE_KEY = "value"
BOOTSTRAP_FORMAT_KEY = "format"
DEFAULT_BOOTSTRAP_FORMAT = "cloud-config"


class BootstrapDataInvalid(ValueError):
    """The bootstrap Secret lacks its `value`, or a key is not base64."""


def dig(obj: object, *path: str) -> Any:
    """The value at `path`, or None when any step is absent or not a mapping."""
    value: Any = obj
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


@dataclass(frozen=True)
class Bootstrap:
    # Standard, padded base64 of the raw bytes of `value`: raw bytes may be gzip, which
    # is not text, so the payload is always encoded, whatever the bootstrap provider.
    data: str
    format: str


def bootstrap_of(secret: Json) -> Bootstrap:
    """The bootstrap inputs of a bootstrap Secret whose `data` is base64, as the API
    returns it. Raises BootstrapDataInvalid naming the Secret and what is wrong."""
    name = dig(secret, "metadata", "name") or "(unnamed)"
    data = secret.get("data") or {}
    if BOOTSTRAP_VALUE_KEY not in data:
        raise BootstrapDataInvalid(f"bootstrap Secret {name} has no key {BOOTSTRAP_VALUE_KEY!r}")
    raw = _decoded(data[BOOTSTRAP_VALUE_KEY], name, BOOTSTRAP_VALUE_KEY)
    fmt = DEFAULT_BOOTSTRAP_FORMAT
    if BOOTSTRAP_FORMAT_KEY in data:
        encoded = _decoded(data[BOOTSTRAP_FORMAT_KEY], name, BOOTSTRAP_FORMAT_KEY)
        try:
            fmt = encoded.decode().strip() or DEFAULT_BOOTSTRAP_FORMAT
        except UnicodeDecodeError:
            why = f"bootstrap Secret {name} key 'format' is not text"
            raise BootstrapDataInvalid(why) from None
    # Re-encoded rather than passed through: one canonical spelling hashes the same
    # however the API server's client happened to encode it.
    return Bootstrap(data=base64.b64encode(raw).decode("ascii"), format=fmt)


def _decoded(value: object, name: str, key: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise BootstrapDataInvalid(f"bootstrap Secret {name} key {key!r} is not base64") from None


def valid_endpoint(endpoint: object) -> Json | None:
    """An APIEndpoint with both host and port set (CAPI's IsValid), as the input shape."""
    host, port = dig(endpoint, "host"), dig(endpoint, "port")
    if not isinstance(host, str) or not host or not isinstance(port, int) or port <= 0:
        return None
    return {"host": host, "port": port}


def cluster_network_of(cluster: Json) -> Json | None:
    """Cluster.spec.clusterNetwork in the input's shape; null when none of its four
    fields is set. Every attribute is present when it is not null: lists as [], scalars
    as null, so a module's type needs no optional()."""
    network = dig(cluster, "spec", "clusterNetwork") or {}
    value = {
        "pods": list(dig(network, "pods", "cidrBlocks") or []),
        "services": list(dig(network, "services", "cidrBlocks") or []),
        "service_domain": network.get("serviceDomain") or None,
        "api_server_port": network.get("apiServerPort"),
    }
    return value if any(item not in (None, []) for item in value.values()) else None
