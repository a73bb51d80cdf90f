"""What the caches keep of a Job, a Secret or a ConfigMap: the informers' transforms.

Each transform runs as an object is decoded, before it is stored: what it drops never
sits in memory. Each keeps exactly what some rule reads, and says which."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

import orjson

from controller.core import RUNNER_VARS_READ, SECRET, TERMINAL_CONDITIONS, containers
from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    DATA_BYTES,
    DATA_KEYS,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_OUTPUTS_OF,
    LABEL_PLAN_OF,
    STATE_MANIFEST_KEY,
    STATE_OUTPUTS_KEY,
    STATE_OUTPUTS_LIMIT,
    legacy_state_secret_name,
    state_secret_name,
)
from controller.core.basics.runner_vars import RunnerVar
from runtime.cache import interned
from runtime.cache.resource import Obj
from runtime.jsonobj import Json

Transform = Callable[[Obj], Obj]
# A durable inputs Secret is `<name>-<kind>-<key>-inputs-<hash8>` (controller/core/plan/jobspec.py).
INPUTS_INFIX = "-inputs-"

# What the controller reads of a Job (controller/core/jobs/job.py, history.py, sensitive.py,
# job_env.py, io/accountant.py, io/interrupted.py, io/janitor.py): its identity, its labels
# (but the four the Job controller adds, which name the Job itself) and annotations,
# owners, its status's times and counts, and of its conditions the terminal ones
# (Complete, Failed); of its pod template, only three of the runner's variables (the
# inputs hash, and only when the annotation does not record it; the inputs Secret and
# the secret variables a message is redacted with) and the Secrets it takes its
# environment from. The rest of the template, by far the largest part, is dropped as the
# Job is decoded. Strings that many Jobs repeat are interned and equal times within one
# Job shared (a finished Job's completionTime is its terminal condition's time): with the
# store's interning this brings a cached Job under 4 KiB (captf bench scale:
# bytes_per_cached_job).
JOB_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)
JOB_CONTROLLER_LABELS = frozenset(
    {
        "batch.kubernetes.io/controller-uid",
        "batch.kubernetes.io/job-name",
        "controller-uid",
        "job-name",
    }
)
# Of an owner reference, what finds the owner (blockOwnerDeletion is the garbage
# collector's alone).
OWNER_REFERENCE = ("apiVersion", "kind", "name", "uid", "controller")
JOB_STATUS = ("startTime", "completionTime", "active", "succeeded", "failed")
JOB_CONDITION_WORDS = ("type", "status", "reason")


def job_fields(job: Obj) -> Obj:
    """A Job as cached: only the fields listed above."""
    meta = job.get("metadata") or {}
    kept_meta = {k: meta[k] for k in JOB_METADATA if k in meta}
    owners = kept_meta.get("ownerReferences")
    if owners:
        kept_meta["ownerReferences"] = [
            {k: ref[k] for k in OWNER_REFERENCE if k in ref}
            for ref in owners
            if isinstance(ref, dict)
        ]
    labels = kept_meta.get("labels")
    if labels:
        kept_meta["labels"] = {k: v for k, v in labels.items() if k not in JOB_CONTROLLER_LABELS}
    kept: Obj = {
        "apiVersion": interned(job.get("apiVersion", "batch/v1")),
        "kind": interned(job.get("kind", "Job")),
        "metadata": kept_meta,
    }
    if "status" in job:
        kept["status"] = _job_status(job["status"])
    recorded = bool((kept_meta.get("annotations") or {}).get(ANN_INPUTS_HASH))
    kept_env = _runner_env(
        job, RUNNER_VARS_READ - {RunnerVar.INPUTS_HASH} if recorded else RUNNER_VARS_READ
    )
    if kept_env:
        kept["spec"] = {"template": {"spec": {"containers": kept_env}}}
    return kept


def _job_status(status: Json) -> Json:
    """Times, counts and the terminal conditions (without their messages, which nothing
    reads)."""
    kept = {k: status[k] for k in JOB_STATUS if k in status}
    conditions = [
        _condition(c, kept.get("completionTime"))
        for c in status.get("conditions") or []
        if isinstance(c, dict) and c.get("type") in TERMINAL_CONDITIONS
    ]
    if conditions:
        kept["conditions"] = conditions
    return kept


def _condition(cond: Json, completed: object) -> Json:
    """Its words interned; its time, when it equals completionTime, the same string."""
    kept = {k: interned(cond[k]) for k in JOB_CONDITION_WORDS if k in cond}
    if "lastTransitionTime" in cond:
        when = cond["lastTransitionTime"]
        kept["lastTransitionTime"] = completed if when == completed else when
    return kept


def _runner_env(job: Obj, read: frozenset[RunnerVar]) -> list[Json]:
    """Per container, the literal variables of `read` and the envFrom Secrets; a container
    with neither is left out."""
    kept: list[Json] = []
    for container in containers(job):
        env = [
            {"name": interned(e["name"]), "value": interned(e["value"])}
            for e in container.get("env") or []
            if e.get("name") in read and "value" in e
        ]
        sources = [
            {"secretRef": {"name": interned(s["secretRef"]["name"])}}
            for s in container.get("envFrom") or []
            if (s.get("secretRef") or {}).get("name")
        ]
        if env or sources:
            kept.append({"env": env, "envFrom": sources})
    return kept


# What the controller reads of a Secret's or a ConfigMap's metadata: its identity, its
# version (data is fetched again when it moves), labels (whose is it) and annotations
# (a state's serial and inputs hash, an inputs Secret's interrupted-apply record).
DATA_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations")


def metadata_fields(api_version: str, kind: str) -> Transform:
    """PartialObjectMetadata as cached: the metadata read, under its real kind."""

    def transform(obj: Obj) -> Obj:
        meta = obj["metadata"]
        kept = {k: meta[k] for k in DATA_METADATA if k in meta}
        return {"apiVersion": api_version, "kind": kind, "metadata": kept}

    return transform


def own_secret_fields(secret: Obj) -> Obj:
    """A Secret CAPTF wrote, as cached: the metadata read and the data decisions read.

    A durable inputs Secret keeps its values (the inputs, and what a Job's messages are
    redacted with), an outputs Secret too (other objects take variables from it); a
    plan Secret keeps its keys (a decision asks only whether it has any; the plan itself
    can be near a megabyte); a state keeps its contract outputs (`outputs.json`: the
    object's write-back and its members' inputs read them) up to STATE_OUTPUTS_LIMIT,
    and above it the key with no value (so the decision can say "too large"), never the
    state itself, and the list of its keys beside it, under DATA_KEYS: a state without
    its terraform.tfstate key is unreadable, and a deletion holds on it; backups and
    rescues keep none (decisions read their annotations; their data is fetched if an
    object reads it after all)."""
    kept = metadata_fields("v1", SECRET)(secret)
    name = str(kept["metadata"].get("name", ""))
    labels = kept["metadata"].get("labels") or {}
    data = secret.get("data") or {}
    if LABEL_PLAN_OF in labels:
        kept["data"] = dict.fromkeys(data, "")
    elif _is_state(str(kept["metadata"].get("namespace", "")), name, labels):
        kept[DATA_KEYS] = sorted(data)
        kept[DATA_BYTES] = state_size(data)
        if STATE_OUTPUTS_KEY in data:
            kept["data"] = {STATE_OUTPUTS_KEY: _bounded(str(data[STATE_OUTPUTS_KEY]))}
    elif LABEL_OUTPUTS_OF in labels or (INPUTS_INFIX in name and LABEL_BACKUP_OF not in labels):
        kept["data"] = data
    return kept


def state_size(data: dict[str, Any]) -> int:
    """Bytes of the state a state Secret holds: the size its manifest states (the body
    may sit in parts, compressed), else its data's, decoded (the layout before it)."""
    manifest = data.get(STATE_MANIFEST_KEY)
    if isinstance(manifest, str):
        try:
            size = orjson.loads(base64.b64decode(manifest)).get("size")
        except (ValueError, AttributeError, binascii.Error):
            size = None
        if isinstance(size, int):
            return size
    return decoded_size(data)


def decoded_size(data: dict[str, Any]) -> int:
    """Bytes of a Secret's data once decoded (each value is base64, padded)."""
    return sum(len(v) * 3 // 4 - v.count("=", -2) for v in data.values() if isinstance(v, str))


def _bounded(raw: str) -> str:
    """A state's contract outputs as cached: "" above STATE_OUTPUTS_LIMIT (the decision
    then says they are too large)."""
    # base64: 3 bytes per 4 characters, less the padding.
    size = len(raw) * 3 // 4 - (len(raw) - len(raw.rstrip("=")))
    return raw if size <= STATE_OUTPUTS_LIMIT else ""


def _is_state(namespace: str, name: str, labels: dict[str, str]) -> bool:
    """The state Secret of the object its kind and name labels name (under its name, or
    the name before kinds were part of it)."""
    owner, kind = labels.get(LABEL_NAME), labels.get(LABEL_KIND)
    if not owner or not kind or LABEL_BACKUP_OF in labels:
        return False
    return name in (state_secret_name(namespace, kind, owner), legacy_state_secret_name(owner))


# What the controller reads of a Pending runner pod (controller/core/jobs/starting.py):
# its identity, its labels (the Job's name, the object's), its creation time, and of each
# container's status its image and waiting reason and message. Nothing else.
POD_METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels")


def pod_fields(pod: Obj) -> Obj:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    kept_status: Json = {"phase": status.get("phase")}
    for key in ("initContainerStatuses", "containerStatuses"):
        statuses = [_container_waiting(c) for c in status.get(key) or [] if isinstance(c, dict)]
        if statuses:
            kept_status[key] = statuses
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {k: meta[k] for k in POD_METADATA if k in meta},
        "status": kept_status,
    }


def _container_waiting(container: Json) -> Json:
    waiting = (container.get("state") or {}).get("waiting")
    kept: Json = {"name": container.get("name"), "image": container.get("image")}
    if isinstance(waiting, dict):
        kept["state"] = {"waiting": {k: waiting[k] for k in ("reason", "message") if k in waiting}}
    return kept


# Of the Job controller's FailedCreate Events: whom they are about, what they say, when.
EVENT_KEYS = ("reason", "message", "firstTimestamp", "lastTimestamp", "eventTime", "count")


def event_fields(event: Obj) -> Obj:
    meta = event.get("metadata") or {}
    involved = event.get("involvedObject") or {}
    kept: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {k: meta[k] for k in DATA_METADATA if k in meta}
        | ({"creationTimestamp": meta["creationTimestamp"]} if "creationTimestamp" in meta else {}),
        "involvedObject": {k: involved[k] for k in ("kind", "name", "uid") if k in involved},
    }
    return kept | {k: event[k] for k in EVENT_KEYS if k in event}
