"""What one pass reads about an object: the one list, from the spec readers alone.

Beside its Jobs and TerraformPlans (by its uid), the Leases (run slots, its
namespace's) and what says a Job cannot start, a pass reads the objects named here.
The controller's caches (controller/io/caches.py) look them up by key or index, the
snapshot builder (`snapshot.build`, for `captf decide -f` and `--live`) keeps only
them of a flat list, so a decision cannot read in one place what the other misses.
A new Secret, ConfigMap or Cluster API object a rule reads is added here, and nowhere
else.

The list is read in two stages, since some names are only known from an object read
first: the Cluster API owner and Cluster (`capi_wanted`, from the object alone); then
the CAPTF objects (`captf_wanted`: a member's TerraformCluster is named by its
Cluster's infrastructureRef) and the Secrets and ConfigMaps (`secrets_wanted`: the
bootstrap data by the owner, the credentials by the identity reference, which a member
may take from its TerraformCluster). Pure."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from enum import Enum

from controller.core.basics.names import (
    CAPI_CLUSTER,
    CLUSTER,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    inputs_secret_prefix,
    labelled_for,
    legacy_inputs_secret_prefix,
    legacy_state_secret_name,
    state_part_names,
    state_secret_name,
)
from controller.core.contract.sizing import CLAIM_WRITERS, claim_writers
from controller.core.jobs.job import annotations_of, labels_of, name_of, result
from controller.core.jobs.job_env import job_env
from controller.core.spec.identity import credentials_secret, identity_ref_of
from controller.core.spec.refs import (
    ObjectRef,
    bootstrap_secret_of,
    capi_cluster_ref,
    cluster_name_of,
    configmaps_read,
    dependencies,
    owner_of,
    secrets_read,
    spec_of,
    terraform_cluster_of,
)
from runtime.jsonobj import Json

Related = Mapping[tuple[str, str], Json]


class How(Enum):
    """How a Secret is read: with its values (the inputs render them, the Jobs' messages
    are redacted with them; io fetches a user Secret's data), its keys only (a plan
    Secret: does it hold a plan), or as cached (what CAPTF wrote, with the data its cache
    keeps; a user Secret's metadata: the identity's mirror is only looked for)."""

    VALUES = "values"
    KEYS = "keys"
    CACHED = "cached"


def capi_wanted(obj: Json) -> tuple[ObjectRef, ...]:
    """The Cluster API objects: the owner the object acts for, and its Cluster."""
    refs = (owner_of(obj), capi_cluster_ref(obj))
    return tuple(dict.fromkeys(ref for ref in refs if ref is not None))


# Of a Cluster API object's status a pass reads only `initialization` (the contract's
# infrastructureProvisioned and controlPlaneInitialized, owners.py and contract/inputs.py);
# of its metadata all but its finalizers and its deletion (Cluster API's own: no rule
# reads an owner's deletion, each object's own deletion is what it acts on); its spec
# but the provider IDs Cluster API copies from ours. The conditions, counters and phase Cluster API
# writes as Machines come and go decide nothing here: the caches keep only what
# `capi_read` leaves, the snapshot of `captf decide` too, and a change to the rest wakes
# nothing (issue 31: each Machine's progress woke every member of its Cluster). A rule
# that reads more of it adds the field here. Of managedFields only one thing is read: who
# wrote a MachinePool's `replicas-managed-by: captf` (contract/sizing.py), kept under
# CLAIM_WRITERS, since the caches drop managedFields.
CAPI_STATUS_READ = ("initialization",)
CAPI_METADATA_UNREAD = (
    "finalizers",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
# Copied by Cluster API from the TerraformMachine (Pool) once it is provisioned: its own.
CAPI_SPEC_UNREAD = ("providerID", "providerIDList")


def capi_read(obj: Json) -> Json:
    """What a pass reads of a Cluster API object: all but the status outside
    CAPI_STATUS_READ, the metadata in CAPI_METADATA_UNREAD, the spec in CAPI_SPEC_UNREAD."""
    status = obj.get("status") or {}
    out = obj
    if "status" in obj and not (status and status.keys() <= set(CAPI_STATUS_READ)):
        # No status read is no status: an object before and after its first status write
        # of unread fields reads the same.
        out = {k: v for k, v in obj.items() if k != "status"}
        kept = {k: status[k] for k in CAPI_STATUS_READ if k in status}
        out |= {"status": kept} if kept else {}
    for part, unread in (("metadata", CAPI_METADATA_UNREAD), ("spec", CAPI_SPEC_UNREAD)):
        found = obj.get(part)
        if isinstance(found, dict) and any(k in found for k in unread):
            out = {**out, part: {k: v for k, v in found.items() if k not in unread}}
    return _with_claim_writers(obj, out)


def _with_claim_writers(obj: Json, out: Json) -> Json:
    """`out` with CLAIM_WRITERS from `obj`'s managedFields, when it has them (an object
    read again from a cache has none: what it kept stands)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or "managedFields" not in metadata:
        return out
    writers = claim_writers(metadata)
    if writers is None:
        return out
    return {**out, "metadata": {**out["metadata"], CLAIM_WRITERS: writers}}


def captf_wanted(obj: Json, capi: Related) -> tuple[tuple[ObjectRef, ...], str]:
    """The other CAPTF objects, by ObjectRef: the dependencies, and a member's
    TerraformCluster (named by its Cluster in `capi`, as found); and the Cluster name
    whose members a TerraformCluster reads ("" for any other kind)."""
    wanted = list(dependencies(spec_of(obj)))
    if obj.get("kind") != CLUSTER:
        ref = capi_cluster_ref(obj)
        name = terraform_cluster_of(capi.get(ref)) if ref is not None else ""
        wanted.append(ObjectRef(CLUSTER, name))
    refs = tuple(dict.fromkeys(ref for ref in wanted if ref.name))
    return refs, cluster_name_of(obj) if obj.get("kind") == CLUSTER else ""


def is_member(obj: Json, cluster: str, other: Json) -> bool:
    """Whether `other` is a member the TerraformCluster `obj` reads (`cluster`: its
    Cluster's name, from `captf_wanted`)."""
    return bool(cluster) and other.get("kind") != CLUSTER and cluster_name_of(other) == cluster


def secrets_wanted(obj: Json, jobs: Iterable[Json], related: Related) -> dict[str, How]:
    """The Secrets of the object's namespace it reads by name, each with how: its state,
    the spec's (credentials, variables), those its Jobs carried, the bootstrap data of a
    member's owner, a member's TerraformCluster's state (its exports), the plan Secrets its
    Jobs name, and the credentials Secret of its identity. Its durable inputs and the
    state's backups are found by its name (`owns_secret`)."""
    name, spec, kind = name_of(obj), spec_of(obj), str(obj.get("kind", ""))
    jobs = list(jobs)
    values = [*secrets_read(spec), *(s for job in jobs for s in job_env(job).carried_secrets)]
    values += _bootstrap(obj, related)
    wanted: dict[str, How] = dict.fromkeys(state_names(obj, kind, name), How.CACHED)
    wanted |= {plan: How.KEYS for plan in plan_secrets(jobs)}
    ref = identity_ref_of(obj, related)
    if ref is not None:
        wanted.setdefault(credentials_secret(ref), How.CACHED)
    if obj.get("kind") != CLUSTER:  # a member's inputs: its cluster's exports
        clusters = (terraform_cluster_of(o) for o in related.values() if _is_capi_cluster(o))
        wanted |= {s: How.CACHED for c in clusters if c for s in state_names(obj, CLUSTER, c)}
    wanted |= {secret: How.VALUES for secret in values if secret}
    return wanted


def state_names(obj: Json, kind: str, name: str) -> tuple[str, str]:
    """The names the state of `kind`/`name` in the object's namespace may have: its own,
    and the one before kinds were part of it (read until it is moved; snapshot.state_of
    keeps only a Secret labelled for that object)."""
    namespace = str(obj.get("metadata", {}).get("namespace", ""))
    return state_secret_name(namespace, kind, name), legacy_state_secret_name(name)


def state_parts_wanted(
    obj: Json, wanted: Container[str], found: Callable[[str], Json | None]
) -> list[str]:
    """The parts the object's state Secrets name (`found`: a wanted Secret as read, or
    None), second stage of the list: a part's name is only known from its state."""
    parts: list[str] = []
    for secret in state_names(obj, str(obj.get("kind", "")), name_of(obj)):
        state = found(secret) if secret in wanted else None
        if state is not None:
            parts += state_part_names(secret, annotations_of(state))
    return parts


def owns_secret(obj: Json, secret: Json) -> bool:
    """A Secret found by the object's kind and name rather than named, and labelled for
    it: a durable inputs Secret (`<base>-inputs-...`, or the name before kinds were part
    of it) or a backup of its state (labelled captf.io/state-backup-of)."""
    name, kind, secret_name = name_of(obj), str(obj.get("kind", "")), name_of(secret)
    namespace = str(obj.get("metadata", {}).get("namespace", ""))
    prefixes = (inputs_secret_prefix(namespace, kind, name), legacy_inputs_secret_prefix(name))
    if secret_name.startswith(prefixes):
        return labelled_for(secret, kind, name)
    labels = labels_of(secret)
    return labels.get(LABEL_BACKUP_OF) == name and labels.get(LABEL_KIND) == kind


def configmaps_wanted(obj: Json) -> tuple[str, ...]:
    """The ConfigMaps of the namespace it reads: the module's, the variables'."""
    return tuple(configmaps_read(spec_of(obj)))


def plan_secrets(jobs: Iterable[Json]) -> list[str]:
    """The plan Secrets the Jobs' results name: a decision asks only whether they have keys."""
    names = (str((result(job) or {}).get("planSecret") or "") for job in jobs)
    return [name for name in names if name]


def _bootstrap(obj: Json, related: Related) -> list[str]:
    """The bootstrap data Secret of a member's owner: a user Secret, read like the others."""
    owner = owner_of(obj)
    if obj.get("kind") == CLUSTER or owner is None:
        return []
    name = bootstrap_secret_of(related.get(owner))
    return [name] if name else []


def _is_capi_cluster(obj: Json) -> bool:
    return obj.get("kind") == CAPI_CLUSTER
