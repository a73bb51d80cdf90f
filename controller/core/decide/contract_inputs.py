"""The contract inputs of one object, assembled from what its snapshot shows.

The sources: the Cluster API objects in `snap.related` (ObjectRef("Cluster", name),
ObjectRef("Machine", name), ObjectRef("MachinePool", name), whole objects), the
bootstrap data Secret in `snap.secrets`, the cluster module's outputs (`outputs.json`
of the TerraformCluster's state Secret, which the runner writes with the state), and
the newest durable inputs Secret's `contract.json` (what was rendered last: the latch
of control_plane_initialized).

Three answers besides the inputs, and who owns each:
- NotYet: an object the inputs come from is not there (no owner yet, no Cluster, no
  bootstrap Secret). Not an error and not a wait of its own: the owner waits of
  DecideOp (WaitingForOwner, WaitingForBootstrapData, ...) say why, and come before
  any op, so rendering must not mask them;
- Refused: bad input that retrying cannot fix until it changes (a user variable the
  contract reserves, a bootstrap Secret without `value`): a wait with its reason;
- None: the object plays no contract role (a kind outside it)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    CLUSTER,
    STATE_OUTPUTS_KEY,
    Reason,
)
from controller.core.contract import inputs as contract
from controller.core.contract import variables
from controller.core.contract.outputs import Pending, Valid, decode
from controller.core.contract.roles import Role, UnknownKind, contract_for_kind
from controller.core.contract.sources import BootstrapDataInvalid, bootstrap_of
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.job import annotations_of, created_at, name_of
from controller.core.spec import inputs_secret
from controller.core.spec.inputs import Inputs
from controller.core.spec.inputs_secret import CONTRACT_KEY, InputsData, InputsSecretError
from controller.core.spec.refs import (
    ModuleImage,
    ObjectRef,
    bootstrap_secret_of,
    cluster_name_of,
    owner_of,
    terraform_cluster_of,
)
from runtime.jsonobj import Json

# The state Secret's key of the root's contract outputs; the cache keeps it "" when it
# was too large to keep (controller/io/trimming.py).
OUTPUTS_KEY = STATE_OUTPUTS_KEY


@dataclass(frozen=True)
class NotYet:
    message: str


@dataclass(frozen=True)
class Refused:
    reason: str
    message: str


Assembled = Json | NotYet | Refused | None


def role_of(kind: str) -> Role | None:
    try:
        return contract_for_kind(kind).role
    except UnknownKind:
        return None


def assemble(snap: Snapshot, user_variables: Mapping[str, Any]) -> Assembled:
    """The object's contract inputs, or why there are none yet (see the module)."""
    role = role_of(snap.kind)
    if role is None:
        return None
    # Cluster API's GetOwnerCluster / GetClusterFromMetadata: one reader (spec/refs.py).
    cluster_name = cluster_name_of(snap.obj)
    cluster = snap.related.get(ObjectRef("Cluster", cluster_name)) if cluster_name else None
    if cluster is None:
        return NotYet("the owning Cluster is not there yet")
    refused = variables.refusals(user_variables, role)
    if refused:
        return Refused(Reason.VARIABLES_REFUSED, variables.refusal_message(refused))
    if role is Role.CLUSTER:
        return contract.cluster_inputs(obj=snap.obj, cluster=cluster, previous=previous(snap))
    owner_kind = "Machine" if role is Role.MACHINE else "MachinePool"
    owner_ref = owner_of(snap.obj)  # GetOwnerMachine: one reader (spec/refs.py)
    owner = snap.related.get(owner_ref) if owner_ref is not None else None
    if owner is None:
        return NotYet(f"the owning {owner_kind} is not there yet")
    secret_name = bootstrap_secret_of(owner)
    secret = snap.secrets.get(secret_name) if secret_name else None
    if secret is None:
        return NotYet(f"{owner_kind} {name_of(owner)} has no bootstrap data yet")
    try:
        bootstrap = bootstrap_of(secret)
    except BootstrapDataInvalid as bad:
        return Refused(Reason.BOOTSTRAP_DATA_INVALID, str(bad))
    outputs = cluster_outputs(snap, cluster)
    if role is Role.MACHINE:
        return contract.machine_inputs(
            obj=snap.obj,
            machine=owner,
            cluster=cluster,
            bootstrap=bootstrap,
            exports=outputs.get("exports"),
        )
    return contract.pool_inputs(
        obj=snap.obj,
        pool=owner,
        cluster=cluster,
        bootstrap=bootstrap,
        exports=outputs.get("exports"),
        cluster_failure_domains=_domain_names(outputs),
        observed_replicas=_observed_replicas(snap),
    )


def with_contract(inputs: Inputs, role: Role, assembled: Json) -> Inputs:
    """The inputs carrying the contract inputs, the hash covering their hashed part."""
    hashed = contract.hashed_inputs(role, assembled)
    return Inputs(
        module=inputs.module,
        variables=inputs.variables,
        secret_names=inputs.secret_names,
        contract=assembled,
        contract_hashed=hashed,
        image=inputs.image,
    )


class TooLarge(Enum):
    """outputs.json was above the cache's limit: kept as "", its values unknown."""

    TOO_LARGE = "too large"


def state_outputs(secret: Json | None) -> Json | TooLarge | None:
    """The contract outputs a state Secret holds ({name: value}); None when it holds
    none (no contract apply yet, or a state written before the key existed)."""
    raw = ((secret or {}).get("data") or {}).get(OUTPUTS_KEY)
    if raw is None:
        return None
    if raw == "":
        return TooLarge.TOO_LARGE
    parsed = _json(raw)
    return parsed if isinstance(parsed, dict) else None


def cluster_outputs(snap: Snapshot, cluster: Json) -> Json:
    """The cluster module's outputs, from its TerraformCluster's state: {} before any."""
    name = terraform_cluster_of(cluster)
    found = state_outputs(snap.state_of(CLUSTER, name)) if name else None
    return found if isinstance(found, dict) else {}


def previous(snap: Snapshot) -> Json | None:
    """The contract inputs of the durable inputs Secret the state was applied with, else
    of the newest one (by creation time), or None: what the module was last given, which
    moves with the object. The state's hash decides first because `clusterctl move`
    recreates every Secret within the same second, so creation times no longer order them."""
    secrets = [s for s in snap.inputs_secrets() if CONTRACT_KEY in (s.get("data") or {})]
    if not secrets:
        return None
    applied = annotations_of(snap.state_secret).get(ANN_INPUTS_HASH) if snap.state_secret else None
    matching = [s for s in secrets if applied and annotations_of(s).get(ANN_INPUTS_HASH) == applied]
    newest = max(matching or secrets, key=lambda s: str(created_at(s) or ""))
    carried = _carried(newest)
    return carried.contract if carried is not None else None


def applied_inputs(snap: Snapshot, current: Inputs) -> Inputs | None:
    """The durable inputs the state was applied with, when they carry contract inputs:
    the inputs of an immutable machine's drift and destroy, which must see what it was
    applied with, whether or not its Machine and bootstrap Secret are still there."""
    applied = annotations_of(snap.state_secret).get(ANN_INPUTS_HASH) if snap.state_secret else None
    role = role_of(snap.kind)
    if not applied or role is None:
        return None
    for secret in snap.inputs_secrets():
        if annotations_of(secret).get(ANN_INPUTS_HASH) != applied:
            continue
        found = _inputs_of(secret, current)
        if found is not None and found.contract is not None:
            found = with_contract(found, role, found.contract)
            return found if found.hash == applied else None
    return None


def _inputs_of(secret: Json, current: Inputs) -> Inputs | None:
    """The inputs a Secret carries, the module image's pull policy the current spec's (the
    Secret does not keep it); None when it carries no contract inputs or is malformed."""
    carried = _carried(secret)
    if carried is None or carried.contract is None:
        return None
    image = None
    if carried.image is not None:
        policy = current.image.pull_policy if current.image is not None else "IfNotPresent"
        image = ModuleImage(carried.image, policy, carried.digest)
    module, variables = dict(carried.module), carried.variables
    return Inputs(module, variables, current.secret_names, contract=carried.contract, image=image)


def _carried(secret: Json) -> InputsData | None:
    """What an inputs Secret carries; None when it is malformed (spec/inputs_secret.py)."""
    try:
        return inputs_secret.decode(secret.get("data"))
    except InputsSecretError:
        return None


def _domain_names(outputs: Json) -> list[str]:
    decoded = decode(Role.CLUSTER, outputs)
    if not isinstance(decoded, Valid | Pending):
        return []
    return [domain.name for domain in decoded.outputs.failure_domains]


def _observed_replicas(snap: Snapshot) -> int | None:
    replicas = snap.status.get("replicas")
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None


def _text(raw: object) -> str | None:
    try:
        return base64.b64decode(str(raw), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _json(raw: object) -> Any:
    text = _text(raw) if raw is not None else None
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
