"""The contract written back: what an object of a contract role tells Cluster API.

Everything here is read from the state (its `outputs.json`, which the runner writes
with the state) and the object's spec, never from Job history or from status alone,
so an object moved by `clusterctl move` (status dropped) computes the same on the
target. Only objects whose inputs carry contract inputs get any of it; the others'
status is as before.

- TerraformCluster: `spec.controlPlaneEndpoint` (the module's, written once, when the
  field is empty and the module was not given one; then `captf.io/endpoint-source:
  module`), `status.failureDomains` (v1beta2: a list of {name, controlPlane,
  attributes});
- TerraformMachine: `spec.providerID` (written once; a later different value is
  OutputsValid=False/ProviderIDChanged, never an overwrite), `status.addresses`,
  `status.failureDomain`, `status.interruptible`;
- TerraformMachinePool: `spec.providerIDList`, `status.replicas`, `status.ready`
  (what Cluster API v1.14's MachinePool controller reads);
- every role: `status.initialization.provisioned` (latched), the conditions
  InfrastructureHealthy and OutputsValid, and `Ready`, which Cluster API mirrors as
  InfrastructureReady: provisioned, healthy and not deleting, nothing else.

Outputs that are invalid or missing write no field at all: a value of the wrong shape
never reaches the API server, and the condition says which output and why."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.basics.names import Op
from controller.core.contract.health import health_condition
from controller.core.contract.inputs import ENDPOINT_SOURCE
from controller.core.contract.outputs import (
    ClusterOutputs,
    Decoded,
    Invalid,
    MachineOutputs,
    Missing,
    Pending,
    PoolOutputs,
    Valid,
    decode,
)
from controller.core.contract.provisioned import provisioned
from controller.core.contract.roles import Role
from controller.core.contract.sizing import AUTOSCALING_ACTIVE as AUTOSCALING
from controller.core.contract.sizing import condition_of
from controller.core.contract.sources import dig, valid_endpoint
from controller.core.decide.context import Context
from controller.core.decide.contract_inputs import TooLarge, role_of, state_outputs
from controller.core.jobs.job import inputs_hash_of, result
from controller.core.spec.refs import owner_of
from runtime.jsonobj import Json

OUTPUTS_VALID = "OutputsValid"
# The runner's error kind of a plan that names an output the module does not declare.
OUTPUTS_MISSING_KIND = "outputs-missing"


@dataclass(frozen=True)
class WriteBack:
    # A merge patch of the object (spec fields, and the endpoint-source annotation);
    # None when nothing changes.
    spec: Json | None
    # Status fields to set (a None value removes the field).
    status: Json
    # Ready (the summary), InfrastructureHealthy and OutputsValid, without times.
    conditions: tuple[Json, ...]


def write_back(ctx: Context) -> WriteBack | None:
    """The write-back of an object whose inputs carry contract inputs; else None."""
    role = role_of(ctx.snap.kind)
    if role is None or ctx.inputs.contract is None:
        return None
    decoded = outputs_of(ctx, role)
    usable = decoded.outputs if isinstance(decoded, Valid | Pending) else None
    was = dig(ctx.snap.status, "initialization", "provisioned") is True
    done = provisioned(role, decoded, applied=bool(ctx.state_inputs_hash), was_provisioned=was)
    health = health_condition(usable.health if usable is not None else None)
    valid = _outputs_condition(decoded)
    spec: Json = {}
    status: Json = {"initialization": {"provisioned": done}}
    match usable:
        case ClusterOutputs():
            _cluster(ctx, usable, spec, status)
        case MachineOutputs():
            valid = _machine(ctx, usable, spec, status) or valid
        case PoolOutputs():
            _pool(ctx, usable, spec, status)
    if role is Role.MACHINEPOOL:
        status["ready"] = done
    ready = _ready(ctx, done=done, healthy=health.status == "True")
    healthy = _cond(health.type, health.status, health.reason, health.message)
    conditions: tuple[Json, ...] = (ready, healthy, valid)
    if role is Role.MACHINEPOOL:
        conditions += (_autoscaling(ctx),)
    return WriteBack(spec=spec or None, status=status, conditions=conditions)


def outputs_of(ctx: Context, role: Role) -> Decoded:
    """The state's contract outputs, decoded; Missing when the newest apply for these
    inputs failed on an output the module does not declare (the state cannot show it)."""
    missing = _missing(ctx)
    if missing is not None:
        return missing
    found = state_outputs(ctx.snap.state_secret)
    if isinstance(found, TooLarge):
        return Invalid("outputs.json", "is larger than the controller keeps (64 KiB)")
    requested = ctx.inputs.contract.get("failure_domain") if ctx.inputs.contract else None
    return decode(role, found or {}, requested_failure_domain=requested)


def _missing(ctx: Context) -> Missing | None:
    last = ctx.history.newest(Op.APPLY)
    if last is None or inputs_hash_of(last.job) not in (None, ctx.inputs.hash):
        return None
    error = (result(last.job) or {}).get("error") or {}
    if not isinstance(error, dict) or error.get("kind") != OUTPUTS_MISSING_KIND:
        return None
    return Missing(tuple(str(name) for name in error.get("outputs") or []))


def _outputs_condition(decoded: Decoded) -> Json:
    match decoded:
        case Valid():
            return _cond(OUTPUTS_VALID, "True", "OutputsValid", "the module's outputs are valid")
        case Pending():
            return _cond(OUTPUTS_VALID, "Unknown", "OutputsPending", decoded.message)
        case Missing():
            return _cond(OUTPUTS_VALID, "False", "OutputsMissing", decoded.message)
        case Invalid():
            return _cond(OUTPUTS_VALID, "False", decoded.reason, decoded.message)


def _cluster(ctx: Context, outputs: ClusterOutputs, spec: Json, status: Json) -> None:
    status["failureDomains"] = [
        {"name": d.name, "controlPlane": d.control_plane, "attributes": dict(d.attributes)}
        for d in outputs.failure_domains
    ] or None
    endpoint = outputs.control_plane_endpoint
    given = (ctx.inputs.contract or {}).get("control_plane_endpoint")
    current = valid_endpoint(dig(ctx.snap.spec, "controlPlaneEndpoint"))
    if endpoint is not None and given is None and current is None:
        spec["spec"] = {"controlPlaneEndpoint": {"host": endpoint.host, "port": endpoint.port}}
        spec["metadata"] = {"annotations": {ENDPOINT_SOURCE: "module"}}


def _machine(ctx: Context, outputs: MachineOutputs, spec: Json, status: Json) -> Json | None:
    """The machine's fields; the ProviderIDChanged condition when the module now reports
    another id than the one written (the written one stays)."""
    if outputs.addresses is not None:
        status["addresses"] = [{"type": a.type, "address": a.address} for a in outputs.addresses]
    status["failureDomain"] = outputs.failure_domain
    status["interruptible"] = outputs.interruptible
    written = ctx.snap.spec.get("providerID") or None
    if outputs.provider_id is None or outputs.provider_id == written:
        return None
    if written is None:
        spec["spec"] = {"providerID": outputs.provider_id}
        return None
    why = f"the module reports provider id {outputs.provider_id!r}, but {written!r} is written"
    return _cond(OUTPUTS_VALID, "False", "ProviderIDChanged", why)


def _pool(ctx: Context, outputs: PoolOutputs, spec: Json, status: Json) -> None:
    if outputs.replicas is not None:
        status["replicas"] = outputs.replicas
    instances = _instances(outputs)
    if instances is not None:
        status["instances"] = instances
    ids = list(outputs.provider_id_list) if outputs.provider_id_list is not None else None
    if ids is not None and ids != list(ctx.snap.spec.get("providerIDList") or []):
        spec["spec"] = {"providerIDList": ids}
    if outputs.provider_id is not None and not ctx.snap.spec.get("providerID"):
        spec.setdefault("spec", {})["providerID"] = outputs.provider_id


def _instances(outputs: PoolOutputs) -> list[Json] | None:
    """status.instances: the module's `instances`, at most INSTANCES_MAX (outputs.py)."""
    if outputs.instances is None:
        return None
    out = []
    for instance in outputs.instances:
        item: Json = {"providerID": instance.provider_id}
        for key, value in (
            ("instanceID", instance.instance_id),
            ("failureDomain", instance.failure_domain),
            ("state", instance.state),
        ):
            if value is not None:
                item[key] = value
        if instance.addresses:
            item["addresses"] = [{"type": a.type, "address": a.address} for a in instance.addresses]
        out.append(item)
    return out


def _autoscaling(ctx: Context) -> Json:
    """AutoscalingActive: whether the cloud sizes the group (the user's
    `replicas-managed-by` with the autoscaler's bounds, contract/sizing.py), else what
    the size is. Never feeds Ready."""
    owner = owner_of(ctx.snap.obj)
    machine_pool = ctx.snap.related.get(owner) if owner is not None else None
    status, reason, message = condition_of(machine_pool or {})
    return _cond(AUTOSCALING, status, reason, message)


def _ready(ctx: Context, *, done: bool, healthy: bool) -> Json:
    if ctx.snap.obj.get("metadata", {}).get("deletionTimestamp"):
        return _cond("Ready", "False", "Deleting", "the object is being deleted")
    if not done:
        return _cond("Ready", "False", "NotProvisioned", "the infrastructure is not provisioned")
    if not healthy:
        return _cond("Ready", "False", "NotHealthy", "InfrastructureHealthy is not True")
    return _cond("Ready", "True", "Provisioned", "provisioned and healthy")


def _cond(kind: str, status: str, reason: str, message: str) -> Json:
    return {"type": kind, "status": status, "reason": reason, "message": message}
