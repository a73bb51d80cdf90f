"""A Job's container as a local command line and environment, resolved as kubelet would.

Only what a runner Job uses is supported: `command`/`args` with `$(VAR)`
references, literal `env`, `valueFrom` (`secretKeyRef`, `configMapKeyRef`,
`fieldRef` on the pod's own metadata) and `envFrom` (`secretRef`, `configMapRef`,
with `prefix`). Precedence is kubelet's: `envFrom` in order, then `env` in order,
a later entry replacing an earlier one. Anything else raises `Unsupported`, so
a Job the executor cannot run faithfully fails loudly instead of running with a
different environment."""

from __future__ import annotations

import base64
import re
import sys
from collections.abc import Mapping
from typing import Any, Protocol

Json = dict[str, Any]

# The runner image's ENTRYPOINT: a container without `command` runs `captf <args>`.
IMAGE_ENTRYPOINT = "captf"
# `captf` here is this checkout's CLI under the running interpreter, so a venv needs no PATH.
LOCAL_CAPTF: tuple[str, ...] = (sys.executable, "-m", "controller.cli")

_REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


class Unsupported(Exception):
    """The container asks for something the executor does not emulate."""


class Missing(Exception):
    """A referenced Secret, ConfigMap or key does not exist (yet): kubelet waits and retries."""


class ObjectReader(Protocol):
    async def read(self, kind: str, namespace: str, name: str) -> Json | None:
        """A Secret or ConfigMap ("secrets"/"configmaps"), or None when it does not exist."""
        ...


def first_container(job: Json) -> Json:
    containers = job.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
    if not containers:
        raise Unsupported("the pod template has no containers")
    found: Json = containers[0]
    return found


def command_line(container: Json, env: Mapping[str, str]) -> list[str]:
    """`command` + `args` with `$(VAR)` expanded; no `command` means the image's `captf`."""
    command = [expand(part, env) for part in container.get("command") or []]
    args = [expand(part, env) for part in container.get("args") or []]
    argv = (command or [IMAGE_ENTRYPOINT]) + args
    if argv[0] == IMAGE_ENTRYPOINT:
        return [*LOCAL_CAPTF, *argv[1:]]
    return argv


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined names are replaced, `$$` is a literal `$`,
    anything else is left as written."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _REFERENCE.sub(replace, text)


async def container_env(
    container: Json, pod: Json, reader: ObjectReader, namespace: str
) -> dict[str, str]:
    """The container's environment; `pod` gives `fieldRef` values (metadata, spec)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        env.update(await _env_from(source, reader, namespace))
    for entry in container.get("env") or []:
        name = str(entry["name"])
        if "valueFrom" in entry:
            value = await _value_from(entry["valueFrom"], pod, reader, namespace, name)
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


async def _value_from(
    source: Json, pod: Json, reader: ObjectReader, namespace: str, name: str
) -> str | None:
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


_FIELD_KEY = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def field_value(pod: Json, path: str) -> str:
    """A downward-API `fieldRef` against the local pod stand-in."""
    metadata = pod.get("metadata", {})
    simple: dict[str, object] = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.serviceAccountName": pod.get("spec", {}).get("serviceAccountName", "default"),
        "spec.nodeName": pod.get("spec", {}).get("nodeName"),
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path] or "")
    keyed = _FIELD_KEY.match(path)
    if keyed:
        values: Mapping[str, str] = metadata.get(keyed.group(1)) or {}
        return str(values.get(keyed.group(2), ""))
    raise Unsupported(f"fieldRef {path}")


def pod_stand_in(job: Json, pod_name: str, node: str) -> Json:
    """The pod kubelet would run for `job`: its template with a name, namespace and node."""
    template = job.get("spec", {}).get("template", {})
    metadata = dict(template.get("metadata") or {})
    metadata.update(name=pod_name, namespace=job["metadata"]["namespace"])
    spec = dict(template.get("spec") or {})
    spec["nodeName"] = node
    return {"metadata": metadata, "spec": spec}
