"""Builders of API objects as the API server returns them, for tests of the core.

Each builder returns a plain dict; keyword arguments override the parts a test
cares about, so a test states only what matters to it."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    ANN_RESULT,
    ANN_SERIAL,
    API_VERSION,
    CAPI_API_VERSION,
    CAPI_CLUSTER,
    CAPI_MACHINE,
    CAPI_POOL,
    CLUSTER,
    GROUP,
    LABEL_CLUSTER_NAME,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_OP,
    LABEL_UID,
    MACHINE,
    OWNER_KINDS,
    PLAN_KIND,
    POOL,
    legacy_state_secret_name,
    state_secret_name,
)
from controller.core.basics.timefmt import format_time
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.steps import decide
from controller.core.spec.inputs import inputs_hash
from runtime.jsonobj import Json

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
NS = "default"
MODULE = {"main.tf": 'resource "terraform_data" "x" {\n  input = var.size\n}\n'}
VARIABLES: Json = {"size": 3}
# A role module: it declares the contract's version input, so the controller renders a
# root around it and passes the contract inputs (controller/core/contract/roles.py).
ROLE_MODULE = MODULE | {"contract.tf": 'variable "captf_contract" {\n  type = string\n}\n'}


def ago(minutes: float = 0.0, seconds: float = 0.0) -> datetime:
    return NOW - timedelta(minutes=minutes, seconds=seconds)


def ts(when: datetime) -> str:
    return format_time(when)


def captf(
    kind: str = CLUSTER,
    name: str = "c1",
    *,
    uid: str | None = None,
    spec: Json | None = None,
    status: Json | None = None,
    annotations: dict[str, str] | None = None,
    deleting: datetime | None = None,
    finalizers: list[str] | None = None,
    ready: bool | None = None,
    owner: str | None = "",
    cluster: str | None = "c1",
) -> Json:
    """A CAPTF object. Its Cluster API owner (`owner`: "" is its own name, None none) is a
    Cluster for a TerraformCluster, a Machine or MachinePool for a member, whose
    cluster-name label is `cluster` (None: no label). `owners_of` builds those owners."""
    base_spec: Json = {
        "source": {"configMapRef": {"name": f"{name}-module"}},
        "variables": dict(VARIABLES),
        "identityRef": {"kind": "Secret", "name": "creds"},
        "jobs": {"image": "captf:dev"},
        # Drift checks are on by default (30 min, issue 30); these objects are about
        # other rules, so they turn them off. Tests of the default remove this key.
        "drift": {"interval": "0"},
    }
    meta: Json = {"name": name, "namespace": NS, "uid": uid or f"uid-{name}"}
    if owner is not None:
        owner_name = owner or name
        meta["ownerReferences"] = [_owner_ref(OWNER_KINDS[kind], owner_name)]
    if kind != CLUSTER and cluster is not None:
        meta["labels"] = {LABEL_CLUSTER_NAME: cluster}
    meta["creationTimestamp"] = ts(ago(minutes=600))
    if annotations:
        meta["annotations"] = dict(annotations)
    if deleting is not None:
        meta["deletionTimestamp"] = ts(deleting)
    if finalizers is not None:
        meta["finalizers"] = list(finalizers)
    obj: Json = {"apiVersion": API_VERSION, "kind": kind, "metadata": meta}
    obj["spec"] = _merge(base_spec, spec or {})
    obj["status"] = dict(status or {})
    if ready is not None:
        condition = {"type": "Ready", "status": "True" if ready else "False"}
        obj["status"]["conditions"] = [condition]
    return obj


def _owner_ref(kind: str, name: str) -> Json:
    return {
        "apiVersion": CAPI_API_VERSION,
        "kind": kind,
        "name": name,
        "uid": f"uid-{kind.lower()}-{name}",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _infra_ref(kind: str, name: str) -> Json:
    return {"apiGroup": GROUP, "kind": kind, "name": name}


def _capi(kind: str, name: str, spec: Json, labels: dict[str, str] | None = None) -> Json:
    meta: Json = {"name": name, "namespace": NS, "uid": f"uid-{kind.lower()}-{name}"}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": CAPI_API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def capi_cluster(
    name: str = "c1",
    *,
    infra: str | None = "",
    infra_kind: str = CLUSTER,
    provisioned: bool = True,
    paused: bool = False,
) -> Json:
    """A Cluster API Cluster whose infrastructureRef names `infra` ("" its own name, None
    nothing), its infrastructure provisioned or not."""
    spec: Json = {}
    if infra is not None:
        spec["infrastructureRef"] = _infra_ref(infra_kind, infra or name)
    if paused:
        spec["paused"] = True
    obj = _capi(CAPI_CLUSTER, name, spec)
    obj["status"] = {"initialization": {"infrastructureProvisioned": provisioned}}
    return obj


def capi_machine(
    name: str, *, infra: str | None = "", cluster: str = "c1", bootstrap: str | None = ""
) -> Json:
    """A Machine naming the TerraformMachine `infra` ("" its own name), with the bootstrap
    data Secret `bootstrap` ("" `<name>-bootstrap`, None not yet)."""
    spec: Json = {"clusterName": cluster, "bootstrap": {}}
    if infra is not None:
        spec["infrastructureRef"] = _infra_ref(MACHINE, infra or name)
    if bootstrap is not None:
        spec["bootstrap"]["dataSecretName"] = bootstrap or f"{name}-bootstrap"
    return _capi(CAPI_MACHINE, name, spec, {LABEL_CLUSTER_NAME: cluster})


def capi_pool(
    name: str, *, infra: str | None = "", cluster: str = "c1", bootstrap: str | None = ""
) -> Json:
    """A MachinePool whose template names the TerraformMachinePool `infra` and `bootstrap`."""
    inner = capi_machine(name, infra=None, cluster=cluster, bootstrap=bootstrap)["spec"]
    if infra is not None:
        inner["infrastructureRef"] = _infra_ref(POOL, infra or name)
    spec: Json = {"clusterName": cluster, "replicas": 1, "template": {"spec": inner}}
    return _capi(CAPI_POOL, name, spec, {LABEL_CLUSTER_NAME: cluster})


def bootstrap_secret(name: str, value: str | None = "#cloud-config\n") -> Json:
    """The bootstrap data Secret of `name` (`<name>-bootstrap`); value None: no `value` key."""
    data = {"format": "cloud-config"} | ({"value": value} if value is not None else {})
    return secret(f"{name}-bootstrap", data)


def owners_of(obj: Json, *, cluster: Json | None = None) -> list[Json]:
    """The Cluster API objects that let `obj` act: its owner naming it back, a member's
    Cluster (`cluster`, else one naming TerraformCluster c1, provisioned) and its
    bootstrap data Secret."""
    name, kind = obj["metadata"]["name"], obj["kind"]
    if kind == CLUSTER:
        return [capi_cluster(name)]
    label = (obj["metadata"].get("labels") or {}).get(LABEL_CLUSTER_NAME, "c1")
    owner = capi_machine(name, cluster=label) if kind == MACHINE else capi_pool(name, cluster=label)
    assert kind in (MACHINE, POOL)
    return [owner, bootstrap_secret(name), cluster or capi_cluster(label, infra="c1")]


def _merge(base: Json, override: Json) -> Json:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def module_configmap(name: str = "c1", data: dict[str, str] | None = None) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-module", "namespace": NS},
        "data": dict(MODULE if data is None else data),
    }


def secret(name: str, data: dict[str, str] | None = None, **annotations: str) -> Json:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in (data or {}).items()}
    meta: Json = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": encoded}


def current_hash(module: dict[str, str] | None = None, variables: Json | None = None) -> str:
    return inputs_hash(
        MODULE if module is None else module, VARIABLES if variables is None else variables
    )


def approval(
    job_name: str,
    variables: Json | None = None,
    *,
    owner: str = "c1",
    kind: str = CLUSTER,
    approved: bool = True,
    phase: str | None = "Pending",
    fingerprint: str = "sha256:f",
    inputs: str | None = None,
) -> Json:
    """The TerraformPlan of a waiting Job, as the controller made it (its status filled for
    the inputs of `variables`), approved unless `approved` is False."""
    status: Json = {"inputsHash": inputs or current_hash(variables=variables)}
    status |= {"fingerprint": fingerprint, "counts": {"delete": 1}, "resources": []}
    if phase is not None:
        status["phase"] = phase
    return {
        "apiVersion": API_VERSION,
        "kind": PLAN_KIND,
        "metadata": {
            "name": job_name,
            "namespace": NS,
            "labels": {LABEL_KIND: kind, LABEL_NAME: owner, LABEL_UID: f"uid-{owner}"},
            "creationTimestamp": ts(ago(minutes=1)),
        },
        "spec": {
            "approved": approved,
            "target": {"kind": kind, "name": owner, "uid": f"uid-{owner}"},
        },
        "status": status,
    }


def kind_of(name: str) -> str:
    """The fixtures name their objects by kind: p* a pool, m* and tm* a machine, the rest a
    cluster."""
    if name.startswith("p"):
        return POOL
    return MACHINE if name.startswith(("m", "tm")) else CLUSTER


def labelled(obj: Json, name: str = "c1", kind: str | None = None) -> Json:
    """`obj` (a Secret) with the kind and name labels of the object it belongs to."""
    labels = obj["metadata"].setdefault("labels", {})
    labels.update({LABEL_KIND: kind or kind_of(name), LABEL_NAME: name})
    return obj


def state(
    name: str = "c1",
    serial: int | str | None = 1,
    inputs: str | None = None,
    *,
    kind: str | None = None,
    legacy: bool = False,
) -> Json:
    """The state Secret of the object `kind`/`name`, labelled for it, under its name (or,
    with `legacy`, the name before kinds were part of it). Without `kind`, the fixtures'
    naming says it (`kind_of`)."""
    kind = kind or kind_of(name)
    notes: dict[str, str] = {}
    if serial is not None:
        notes[ANN_SERIAL] = str(serial)
    if inputs is not None:
        notes[ANN_INPUTS_HASH] = inputs
    named = legacy_state_secret_name(name) if legacy else state_secret_name(NS, kind, name)
    s = secret(named, {"terraform.tfstate": "{}"})
    s["metadata"]["labels"] = {LABEL_KIND: kind, LABEL_NAME: name}
    if notes:
        s["metadata"]["annotations"] = notes
    return s


def job(
    op: str,
    seq: int,
    outcome: str | None = "succeeded",
    *,
    finished: datetime | None = None,
    owner: str = "c1",
    kind: str = CLUSTER,
    state: str = "Failed",
    reason: str = "BackoffLimitExceeded",
    result: Json | None = None,
    raw_result: str | None = None,
    annotations: dict[str, str] | None = None,
    created: datetime | None = None,
) -> Json:
    """A Job of `op`. `outcome` is the runner's result outcome (None: no annotation).

    `state` is "Complete", "Failed" (with `reason`) or "Running"; an outcome of
    "succeeded" defaults the state to Complete."""
    finished = finished or ago(minutes=1)
    if outcome == "succeeded" and state == "Failed" and reason == "BackoffLimitExceeded":
        state = "Complete"
    notes = dict(annotations or {})
    if raw_result is not None:
        notes[ANN_RESULT] = raw_result
    elif outcome is not None:
        notes[ANN_RESULT] = orjson.dumps({"outcome": outcome, **(result or {})}).decode()
    name = f"{owner}-{op}-{seq:08x}"
    meta: Json = {
        "name": name,
        "namespace": NS,
        "labels": {LABEL_KIND: kind, LABEL_NAME: owner, LABEL_UID: f"uid-{owner}", LABEL_OP: op},
        "annotations": notes,
        "creationTimestamp": ts(created or finished - timedelta(seconds=30)),
    }
    status: Json = {"startTime": meta["creationTimestamp"]}
    if state == "Complete":
        status |= {"completionTime": ts(finished), "succeeded": 1}
        status["conditions"] = [_cond("SuccessCriteriaMet", finished), _cond("Complete", finished)]
    elif state == "Failed":
        status |= {"failed": 1}
        status["conditions"] = [
            _cond("FailureTarget", finished, reason),
            _cond("Failed", finished, reason),
        ]
    else:
        status["active"] = 1
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "status": status}


def _cond(kind: str, when: datetime, reason: str = "") -> Json:
    cond: Json = {"type": kind, "status": "True", "lastTransitionTime": ts(when)}
    if reason:
        cond["reason"] = reason
    return cond


def lease(name: str, holder: str | None = None, labels: dict[str, str] | None = None) -> Json:
    meta: Json = {"name": name, "namespace": NS}
    if labels:
        meta["labels"] = dict(labels)
    spec: Json = {"holderIdentity": holder} if holder else {}
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


def base_objects(
    name: str = "c1", *, applied: bool = True, module: dict[str, str] | None = None
) -> list[Json]:
    """The objects a healthy, applied cluster has: its Cluster API Cluster, module,
    credentials, state."""
    out = [capi_cluster(name), module_configmap(name, module), secret("creds", {"token": "t"})]
    if applied:
        out.append(state(name, serial=1, inputs=current_hash()))
    return out


def decided(obj: Json, others: list[Json], at: datetime = NOW, **build: Any) -> Json:
    """DecideOp on the snapshot of `obj` and `others` at `at`, as `captf decide` prints it;
    `build` goes to snapshot.build."""
    return to_json(decide(snapshot.build(obj, others, **build), at))
