"""Reading a `captf decide` snapshot file, with one clear error for anything wrong in it.

A snapshot is YAML with `now` (RFC 3339) and `objects` (Kubernetes objects as the
API returns them, the CAPTF object first), and may say under which of the controller's
run-slot flags it is decided (`flags`; controller/cli/decide_settings.py). What is not
a Kubernetes object at all (no kind or name, a field of another JSON type than the API
server stores, a time that does not parse) is refused here rather than decided on.
Anything the API server can store is decided as the controller decides it: an
annotation is free text there, so a `captf.io/restore-serial` of "abc" is no restore
request here either. CAPTF objects written as v1alpha1 are read as the controller reads
them, converted to v1beta1 as the API server has its conversion webhook convert them
(controller/core/conversion)."""

from __future__ import annotations

import base64
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from controller.cli import api_yaml
from controller.core.basics.names import (
    API_VERSION,
    CAPI_KINDS,
    IDENTITY,
    KINDS,
    OLD_API_VERSION,
    PLAN_KIND,
    POLICY_KIND,
)
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.core.conversion.convert import convert
from runtime.jsonobj import Json

# An identity, a policy, and the Namespace whose labels their selectors read, are
# cluster-scoped: they carry no metadata.namespace.
KNOWN_KINDS = frozenset(
    {
        *KINDS,
        *CAPI_KINDS,
        PLAN_KIND,
        "Job",
        "Secret",
        "ConfigMap",
        "Lease",
        IDENTITY,
        "Namespace",
        POLICY_KIND,
    }
)
_LIMITS = ("failedJobsHistoryLimit", "successfulJobsHistoryLimit", "activeDeadlineSeconds")

# The JSON types of the CAPTF fields DecideOp reads, as the CRD schema declares them: a
# mapping is a dict of field shapes, [shape] a list of that shape, a type a scalar field.
# Absent and null are both fine (the API server prunes a null); unknown fields are ignored.
Shape = type | dict[str, "Shape"] | list["Shape"]
_REF: Shape = {"name": str}
_SPEC: Shape = {
    "source": {"configMapRef": _REF, "image": str, "imagePullPolicy": str},
    "variables": dict,
    "variablesFrom": [
        {"secretRef": {"name": str, "key": str}, "configMapRef": {"name": str, "key": str}}
    ],
    "credentialsRef": _REF,  # v1alpha1's, checked before the object is converted
    "identityRef": {"kind": str, "name": str},
    "dependsOn": [{"kind": str, "name": str}],
    "jobs": {
        "image": str,
        "serviceAccountName": str,
        **dict.fromkeys(_LIMITS, int),
    },
    "drift": {"interval": str, "remediate": bool},
    "refresh": {"interval": str},
    "approval": {"mode": str},
    "guard": {"allowDestructive": bool},
    "suspend": bool,
    "outputs": {"secretName": str, "names": [str]},
    "deletionPolicy": str,
    "adoptRetainedState": bool,
    "changeWindows": [{"days": [str], "start": str, "duration": str, "timeZone": str}],
}
_CAPTF_STATUS: Shape = {"activeJob": str, "stateSerial": int, "lastRestoredSerial": int}
_META: Shape = {
    "namespace": str,
    "uid": str,
    "finalizers": [str],
    "ownerReferences": [
        {"apiVersion": str, "kind": str, "name": str, "uid": str, "controller": bool}
    ],
}
# The Cluster API fields DecideOp reads (controller/core/spec/refs.py, decide/owners.py).
_INFRA_REF: Shape = {"apiGroup": str, "kind": str, "name": str}
_BOOTSTRAP: Shape = {"dataSecretName": str}
_CAPI_STATUS: Shape = {"initialization": {"infrastructureProvisioned": bool}}
_BY_KIND: dict[str, dict[str, Shape]] = {
    "ConfigMap": {"data": dict},
    "Secret": {"data": dict, "stringData": dict},
    "Lease": {"spec": {"holderIdentity": str}},
    IDENTITY: {
        "spec": {
            "secretRef": {"namespace": str, "name": str},
            "allowedNamespaces": {"list": [str], "selector": dict},
            "requiredKeys": [str],
        }
    },
    POLICY_KIND: {
        "spec": {
            "namespaceSelector": dict,
            "objectSelector": dict,
            "rules": [
                {"name": str, "scope": str, "expression": str, "action": str, "message": str}
            ],
        }
    },
    PLAN_KIND: {
        "spec": {"approved": bool, "approvedBy": str},
        "status": {"inputsHash": str, "fingerprint": str, "phase": str},
    },
    "Cluster": {
        "spec": {"paused": bool, "infrastructureRef": _INFRA_REF},
        "status": _CAPI_STATUS,
    },
    "Machine": {"spec": {"infrastructureRef": _INFRA_REF, "bootstrap": _BOOTSTRAP}},
    "MachinePool": {
        "spec": {"template": {"spec": {"infrastructureRef": _INFRA_REF, "bootstrap": _BOOTSTRAP}}}
    },
}


class SnapshotError(ValueError):
    """The snapshot file cannot be decided on; the message says why in one line."""


# The controller flags a file may say it was taken under (`flags:`), as `captf run` spells
# them, with the least value each takes: what a decision reads of the run slots.
FILE_FLAGS: dict[str, int | None] = {
    "controller-namespace": None,
    "max-concurrent-runs": 1,
    "max-concurrent-runs-per-cluster": 0,
    "background-jobs-per-minute": 1,
    "background-run-share": None,  # a number more than 0, at most 1
}
SHARE_FLAG = "background-run-share"


@dataclass(frozen=True)
class SnapshotFile:
    now: datetime
    objects: list[Json]
    # The file's `flags:`, by flag name: a string for controller-namespace, else an integer.
    flags: Mapping[str, str | int | float] = field(default_factory=dict)


def load(path: str) -> tuple[datetime, list[Json]]:
    """The snapshot in the file at `path`; "-" reads standard input, as kubectl's -f does."""
    found = read(path)
    return found.now, found.objects


def read(path: str) -> SnapshotFile:
    """The snapshot in the file at `path` with the controller flags it names."""
    try:
        text = sys.stdin.buffer.read().decode() if path == "-" else Path(path).read_text("utf-8")
    except OSError as err:
        raise SnapshotError(f"cannot read {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise SnapshotError(f"{path} is not UTF-8 text") from None
    try:
        doc = api_yaml.load(text)
    except api_yaml.AliasRefused as err:
        raise SnapshotError(f"{path}: {err} (API objects need no aliases)") from None
    except yaml.YAMLError as err:
        if "nesting depth" in str(getattr(err, "problem", "")):  # libyaml's limit
            raise SnapshotError(f"{path} is nested too deeply to read") from None
        # Only the line: a problem's text quotes the file, which may hold a Secret's data.
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SnapshotError(f"{path} is not valid YAML{where}") from None
    except RecursionError:  # the pure-Python parser's limit
        raise SnapshotError(f"{path} is nested too deeply to read") from None
    try:
        now, objects = parse(doc)
        return SnapshotFile(now, objects, flags_of(doc))
    except SnapshotError as err:  # name the file: several may be decided at once
        raise SnapshotError(f"{path}: {err}") from None


def parse(doc: object) -> tuple[datetime, list[Json]]:
    if not isinstance(doc, dict):
        raise SnapshotError("a snapshot is a mapping with `now` and `objects`")
    if "now" not in doc:
        raise SnapshotError("snapshot has no `now`")
    now = _time(doc["now"], "now")
    objects = doc.get("objects")
    if not isinstance(objects, list) or not objects:
        raise SnapshotError("snapshot `objects` must be a non-empty list")
    for index, obj in enumerate(objects):
        _check_object(obj, index)
        _as_the_api_stores(obj)
    if objects[0]["kind"] not in KINDS:
        first = objects[0]["kind"]
        raise SnapshotError(
            f"the first object must be a CAPTF object ({', '.join(KINDS)}), not {first}"
        )
    _check_captf(objects[0])
    return now, [_as_the_controller_reads(obj) for obj in objects]


def _as_the_controller_reads(obj: Json) -> Json:
    return convert(obj, API_VERSION) if obj.get("apiVersion") == OLD_API_VERSION else obj


def flags_of(doc: object) -> dict[str, str | int | float]:
    """The file's `flags:`: a mapping of the FILE_FLAGS, each of the type and range
    `captf run` takes; anything else is refused, so a misspelt flag is not ignored."""
    given = doc.get("flags") if isinstance(doc, dict) else None
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise SnapshotError("flags: must be a mapping of flag names (without --) to values")
    flags: dict[str, str | int | float] = {}
    for name, value in given.items():
        if name not in FILE_FLAGS:
            known = ", ".join(FILE_FLAGS)
            raise SnapshotError(f"flags: {name!r} is not a flag a file may set ({known})")
        least = FILE_FLAGS[name]
        if name == SHARE_FLAG:
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not 0 < value <= 1:
                raise SnapshotError(f"flags: {name} must be a number more than 0, at most 1")
        elif least is None:
            if not isinstance(value, str) or not value:
                raise SnapshotError(f"flags: {name} must be a namespace's name, not {value!r}")
        elif not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise SnapshotError(f"flags: {name} must be an integer of at least {least}")
        flags[name] = value
    return flags


def _check_object(obj: object, index: int) -> None:
    where = f"objects[{index}]"
    if not isinstance(obj, dict):
        raise SnapshotError(f"{where} is not a mapping")
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in KNOWN_KINDS:
        raise SnapshotError(
            f"{where} has unknown kind {kind!r}; known: {', '.join(sorted(KNOWN_KINDS))}"
        )
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise SnapshotError(f"{where} ({kind}) has no metadata.name")
    where = f"{kind}/{meta['name']}"
    for key in ("labels", "annotations"):
        if not isinstance(meta.get(key) or {}, dict):
            raise SnapshotError(f"{where} metadata.{key} is not a mapping")
    _check_shape(meta, _META, f"{where} metadata")
    for key, shape in _BY_KIND.get(kind, {}).items():
        _check_shape(obj.get(key), shape, f"{where} {key}")
    for key in ("creationTimestamp", "deletionTimestamp"):
        if meta.get(key) is not None:
            _time(meta[key], f"{where} metadata.{key}")
    status = obj.get("status") or {}
    if not isinstance(status, dict):
        raise SnapshotError(f"{where} status is not a mapping")
    _check_shape(status, {"conditions": [dict]}, f"{where} status")
    for key in ("startTime", "completionTime"):
        if status.get(key) is not None:
            _time(status[key], f"{where} status.{key}")
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("lastTransitionTime") is not None:
            _time(cond["lastTransitionTime"], f"{where} condition {cond.get('type')}")


def _check_captf(obj: Json) -> None:
    where = f"{obj['kind']}/{obj['metadata']['name']}"
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise SnapshotError(f"{where} has no spec")
    _check_shape(spec, _SPEC, f"{where} spec")
    _check_shape(obj.get("status") or {}, _CAPTF_STATUS, f"{where} status")
    jobs = spec.get("jobs") or {}
    for key in _LIMITS:
        value = jobs.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise SnapshotError(f"{where} spec.jobs.{key} is negative ({value})")


def _check_shape(value: object, shape: Shape, where: str) -> None:
    """Refuses a value of another JSON type than the schema's (a string where a mapping
    belongs, a boolean for an integer): no API server returns one."""
    if value is None:
        return
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise SnapshotError(f"{where} is not a mapping")
        for key, inner in shape.items():
            _check_shape(value.get(key), inner, f"{where}.{key}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise SnapshotError(f"{where} is not a list")
        for index, item in enumerate(value):
            if item is None:
                raise SnapshotError(f"{where}[{index}] is null")
            _check_shape(item, shape[0], f"{where}[{index}]")
    elif not isinstance(value, shape) or (shape is int and isinstance(value, bool)):
        raise SnapshotError(f"{where} is not {_TYPE_NAMES[shape]}: {value!r}")


_TYPE_NAMES = {str: "a string", int: "an integer", bool: "a boolean", dict: "a mapping"}


def _as_the_api_stores(obj: Json) -> None:
    """Values a hand-written file may spell loosely, as the API server would store them:
    label and annotation values are strings (`captf.io/restore-serial: 4` is "4"), a
    condition's status is "True" or "False", and a Secret's stringData is base64 data."""
    meta = obj["metadata"]
    for key in ("labels", "annotations"):
        if meta.get(key):
            meta[key] = {str(k): _text(v) for k, v in meta[key].items()}
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and isinstance(cond.get("status"), bool):
            cond["status"] = "True" if cond["status"] else "False"
    if obj["kind"] == "Secret" and isinstance(obj.get("stringData"), dict):
        plain = obj.pop("stringData")
        encoded = {str(k): base64.b64encode(_text(v).encode()).decode() for k, v in plain.items()}
        obj["data"] = {**(obj.get("data") or {}), **encoded}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _time(value: object, what: str) -> datetime:
    try:
        return parse_time(value)
    except TimeFormatError as err:
        raise SnapshotError(f"{what}: {err}") from None
