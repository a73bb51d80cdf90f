"""A container's environment and command line, resolved from its pod as a kubelet does.

Supported: literal `env` with `$(VAR)` references, `valueFrom` (`secretKeyRef`,
`configMapKeyRef`, `fieldRef`), `envFrom` (`secretRef`, `configMapRef`, with
`prefix`). Precedence is the kubelet's: `envFrom` in order, then `env` in order,
a later entry replacing an earlier one. Anything else (`resourceFieldRef`, an
unknown `fieldPath`) raises `Unsupported`, so a pod the node cannot run
faithfully fails to start instead of running with another environment."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Protocol

from runtime.jsonobj import Json

_REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
_FIELD_KEY = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class Unsupported(Exception):
    """The container asks for something the node does not provide."""


class Missing(Exception):
    """A referenced Secret, ConfigMap or key does not exist (yet): the kubelet waits."""


class ObjectReader(Protocol):
    async def read(self, kind: str, namespace: str, name: str) -> Json | None:
        """A Secret or ConfigMap ("secrets"/"configmaps"), or None when it does not exist."""
        ...


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined names are replaced, `$$` is a literal `$`,
    anything else is left as written."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _REFERENCE.sub(replace, text)


async def container_env(container: Json, pod: Json, reader: ObjectReader) -> dict[str, str]:
    """The container's own environment (without what the node adds)."""
    namespace = str(pod["metadata"]["namespace"])
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        env.update(await _env_from(source, reader, namespace))
    for entry in container.get("env") or []:
        name = str(entry["name"])
        if "valueFrom" in entry:
            value = await _value_from(entry["valueFrom"], pod, reader, name)
            if value is not None:
                env[name] = value
        else:
            env[name] = expand(str(entry.get("value", "")), env)
    return env


async def _env_from(source: Json, reader: ObjectReader, namespace: str) -> dict[str, str]:
    prefix = str(source.get("prefix", ""))
    for field, kind in (("secretRef", "secrets"), ("configMapRef", "configmaps")):
        ref = source.get(field)
        if ref is None:
            continue
        data = await _data(reader, kind, namespace, ref)
        return {} if data is None else {prefix + k: v for k, v in data.items()}
    raise Unsupported(f"envFrom source {sorted(source)}")


async def _value_from(source: Json, pod: Json, reader: ObjectReader, name: str) -> str | None:
    namespace = str(pod["metadata"]["namespace"])
    for field, kind in (("secretKeyRef", "secrets"), ("configMapKeyRef", "configmaps")):
        ref = source.get(field)
        if ref is None:
            continue
        data = await _data(reader, kind, namespace, ref)
        if data is None:
            return None
        key = str(ref["key"])
        if key in data:
            return data[key]
        if ref.get("optional"):
            return None
        # Names the object and the key, never a value.
        raise Missing(f"{kind[:-1]} {ref.get('name')} has no key {key!r} (env {name})")
    if "fieldRef" in source:
        return field_value(pod, str(source["fieldRef"]["fieldPath"]))
    raise Unsupported(f"env {name}: valueFrom {sorted(source)}")


async def _data(
    reader: ObjectReader, kind: str, namespace: str, ref: Json
) -> dict[str, str] | None:
    """The object's data as text; None when it is missing and optional."""
    obj = await reader.read(kind, namespace, str(ref["name"]))
    if obj is None:
        if ref.get("optional"):
            return None
        raise Missing(f"{kind[:-1]} {namespace}/{ref['name']} not found")
    if kind == "secrets":
        raw = obj.get("data") or {}
        return {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in raw.items()}
    text: dict[str, str] = dict(obj.get("data") or {})
    return text


def field_value(pod: Json, path: str) -> str:
    """A downward-API `fieldRef` on the pod as bound to this node."""
    metadata = pod.get("metadata", {})
    spec = pod.get("spec", {})
    status = pod.get("status", {})
    simple: dict[str, object] = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "spec.nodeName": spec.get("nodeName"),
        "status.podIP": status.get("podIP"),
        "status.podIPs": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
        "status.hostIPs": status.get("hostIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    keyed = _FIELD_KEY.match(path)
    if keyed:
        values: Mapping[str, str] = metadata.get(keyed.group(1)) or {}
        return str(values.get(keyed.group(2), ""))
    raise Unsupported(f"fieldRef {path}")
