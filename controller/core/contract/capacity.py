"""Scale from zero: the node a template would make, as Cluster API's autoscaler contract
for infrastructure templates reads it (`status.capacity`, a map of resource quantities,
and `status.nodeInfo`, its `architecture` and `operatingSystem`).

The values come from the template's `spec.capacity` / `spec.nodeInfo`, else from the
module image's labels `io.captf.capacity` and `io.captf.node-info` (JSON objects, as the
public image contract names them). One home for the labels' shape: `captf lint image`
checks it with `label_problems`, the template's status is read with `parse_capacity`
and `parse_node_info`. Pure: the image's labels are io's answer (controller/io/registry.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

LABEL_CAPACITY: Final = "io.captf.capacity"
LABEL_NODE_INFO: Final = "io.captf.node-info"
ARCHITECTURES: Final = ("amd64", "arm64", "s390x", "ppc64le")
OPERATING_SYSTEMS: Final = ("linux", "windows")
NODE_INFO_KEYS: Final = {"architecture": ARCHITECTURES, "operatingSystem": OPERATING_SYSTEMS}
# At most this many resources: a label is metadata, a status is bounded.
MAX_RESOURCES: Final = 32

# Kubernetes' quantity grammar (apimachinery's resource.Quantity), as its OpenAPI states it.
_QUANTITY = re.compile(
    r"^[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# A qualified name: an optional DNS-subdomain prefix and `/`, then a name of at most 63.
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class ShapeError(ValueError):
    """A capacity or node-info value that is not of the contract's shape; the message
    names the key, never more of the value than the key."""


def is_quantity(value: object) -> bool:
    return isinstance(value, str) and bool(_QUANTITY.match(value))


def is_resource_name(name: str) -> bool:
    prefix, slash, rest = name.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix)):
        return False
    return 0 < len(rest) <= 63 and bool(_NAME.match(rest))


def check_capacity(value: object) -> dict[str, str]:
    """The capacity map, or ShapeError: a non-empty object of resource name to quantity."""
    if not isinstance(value, Mapping) or not value:
        raise ShapeError("must be a non-empty JSON object of resource name to quantity")
    if len(value) > MAX_RESOURCES:
        raise ShapeError(f"names {len(value)} resources, at most {MAX_RESOURCES}")
    for name, quantity in value.items():
        if not isinstance(name, str) or not is_resource_name(name):
            raise ShapeError(f"{name!r} is not a resource name")
        if not is_quantity(quantity):
            raise ShapeError(f'the value of {name} is not a quantity string (e.g. "4", "16Gi")')
    return {str(k): str(v) for k, v in value.items()}


def check_node_info(value: object) -> dict[str, str]:
    """The nodeInfo map, or ShapeError: `architecture` and/or `operatingSystem`, no other key."""
    if not isinstance(value, Mapping) or not value:
        raise ShapeError("must be a JSON object with architecture and/or operatingSystem")
    for key, item in value.items():
        allowed = NODE_INFO_KEYS.get(str(key))
        if allowed is None:
            raise ShapeError(f"{key!r} is not architecture or operatingSystem")
        if item not in allowed:
            raise ShapeError(f"{key} must be one of {', '.join(allowed)}")
    return {str(k): str(v) for k, v in value.items()}


def _decoded(label: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ShapeError(f"{label} is not JSON") from None


def parse_capacity(text: str) -> dict[str, str]:
    """The `io.captf.capacity` label's map, or ShapeError."""
    return check_capacity(_decoded(LABEL_CAPACITY, text))


def parse_node_info(text: str) -> dict[str, str]:
    """The `io.captf.node-info` label's map, or ShapeError."""
    return check_node_info(_decoded(LABEL_NODE_INFO, text))


def label_problems(labels: Mapping[str, str]) -> list[str]:
    """What is wrong with the image's capacity labels (none: absent or well-formed)."""
    problems = []
    for label, parse in ((LABEL_CAPACITY, parse_capacity), (LABEL_NODE_INFO, parse_node_info)):
        text = labels.get(label)
        if text is None:
            continue
        try:
            parse(text)
        except ShapeError as err:
            problems.append(f"{label}: {err}")
    return problems


def labels_of(
    capacity: Mapping[str, str] | None, node_info: Mapping[str, str] | None
) -> dict[str, str]:
    """The labels `captf image build --capacity --node-info` writes: compact JSON with
    sorted keys, so one content is one label (and one image key)."""
    out: dict[str, str] = {}
    if capacity is not None:
        out[LABEL_CAPACITY] = json.dumps(
            check_capacity(capacity), sort_keys=True, separators=(",", ":")
        )
    if node_info is not None:
        out[LABEL_NODE_INFO] = json.dumps(
            check_node_info(node_info), sort_keys=True, separators=(",", ":")
        )
    return out


def parse_pairs(text: str) -> dict[str, str]:
    """`cpu=4,memory=16Gi` (the command line's form) or a JSON object, as a map."""
    stripped = text.strip()
    if stripped.startswith("{"):
        value = _decoded("the value", stripped)
        if not isinstance(value, dict):
            raise ShapeError("must be a JSON object")
        return {str(k): str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in stripped.split(","))):
        key, eq, val = part.partition("=")
        if not eq or not key.strip():
            raise ShapeError(f"{part!r} is not KEY=VALUE")
        out[key.strip()] = val.strip()
    return out
