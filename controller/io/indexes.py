"""What each cached object is filed under: the reverse lookups a snapshot and a wake need.

Every value is "namespace/...": an index never spans namespaces, so an object in one
namespace is never found by a lookup made for another. A snapshot or a wake reads a
handful of index entries, whatever else the namespace holds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from controller.core import (
    CONFIGMAP,
    SECRET,
    bootstrap_secret_of,
    cluster_name_of,
    configmaps_read,
    dependencies,
    own_identity_ref,
    owner_of,
    secrets_read,
    spec_of,
)
from controller.core.basics.names import (
    IDENTITY,
    LABEL_BACKUP_OF,
    LABEL_IDENTITY_MIRROR,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_SCOPE,
    LABEL_UID,
    LEASE_WAITS,
    Reason,
    legacy_state_secret_name,
    state_secret_name,
)
from controller.io.trimming import INPUTS_INFIX
from runtime.cache import IndexFunc, label_index
from runtime.cache.resource import Obj

BY_NAMESPACE: Final = "namespace"
BY_UID: Final = "uid"  # a Job, by its object's uid label
BY_SCOPE: Final = "scope"  # a Lease, by its scope label: run slots, operations
BY_REF: Final = "ref"  # "ns/Secret/name", "ns/ConfigMap/name": read or owned
# "ns/cluster": a CAPTF object by its Cluster API Cluster (a TerraformCluster's owner, a
# member's cluster-name label)
BY_CLUSTER: Final = "cluster"
BY_OWNER: Final = "owner"  # "ns/Kind/name": a CAPTF object, by its Cluster API owner
BY_DEPENDENCY: Final = "dependency"  # "ns/Kind/name": an object, by each of its dependsOn
BY_WAITING: Final = "waiting"  # WAITING_FOR_LEASE: its status says it waits for a Lease
BY_INPUTS_OF: Final = "inputs_of"  # "ns/Kind/name": a durable inputs Secret, by its object
BY_BACKUP_OF: Final = "backup_of"  # "ns/Kind/name": a state backup, by its object
WAITING_FOR_LEASE: Final = "lease"
WAITING_FOR_POLICY: Final = "policy"  # PolicyDenied: a policy's change may end it
# An identity is cluster-scoped, so these two are the exception to "namespace/...":
# "name": a CAPTF object, by the TerraformClusterIdentity its own spec names (its users,
# in every namespace); a mirror Secret, by its identity.
BY_IDENTITY: Final = "identity"
BY_MIRROR_OF: Final = "mirror_of"
BY_INVOLVED: Final = "involved"  # "ns/name": an Event, by the Job it is about
BY_ACCOUNT: Final = "account"  # "ns/name": an object, by the ServiceAccount it names


def namespace_index(obj: Obj) -> Iterable[str]:
    ns = obj.get("metadata", {}).get("namespace")
    return [ns] if ns else []


def ref_index(obj: Obj) -> Iterable[str]:
    """The Secrets and ConfigMaps a CAPTF object reads, and its state Secret."""
    meta = obj["metadata"]
    ns, spec = meta.get("namespace", ""), spec_of(obj)
    name, kind = meta["name"], str(obj.get("kind", ""))
    states = [state_secret_name(ns, kind, name), legacy_state_secret_name(name)]
    secrets = [*secrets_read(spec), *states]
    refs = [f"{ns}/{SECRET}/{name}" for name in secrets]
    return refs + [f"{ns}/{CONFIGMAP}/{name}" for name in configmaps_read(spec)]


def cluster_index(obj: Obj) -> Iterable[str]:
    cluster = cluster_name_of(obj)
    return [f"{obj['metadata'].get('namespace', '')}/{cluster}"] if cluster else []


def owner_index(obj: Obj) -> Iterable[str]:
    owner = owner_of(obj)
    ns = obj["metadata"].get("namespace", "")
    return [f"{ns}/{owner.kind}/{owner.name}"] if owner is not None else []


def bootstrap_index(owner: Obj) -> Iterable[str]:
    """A Machine or MachinePool, by its bootstrap data Secret (BY_REF's form)."""
    name = bootstrap_secret_of(owner)
    return [f"{owner['metadata'].get('namespace', '')}/{SECRET}/{name}"] if name else []


def dependency_index(obj: Obj) -> Iterable[str]:
    ns = obj["metadata"].get("namespace", "")
    return [f"{ns}/{dep.kind}/{dep.name}" for dep in dependencies(spec_of(obj))]


def identity_index(obj: Obj) -> Iterable[str]:
    ref = own_identity_ref(spec_of(obj))
    return [ref.name] if ref is not None and ref.kind == IDENTITY else []


def waiting_index(obj: Obj) -> Iterable[str]:
    reason = str(((obj.get("status") or {}).get("next") or {}).get("reason") or "")
    if reason == Reason.POLICY_DENIED:
        return [WAITING_FOR_POLICY]
    waits = reason in LEASE_WAITS or reason == Reason.WAITING_FOR_BACKGROUND_BUDGET
    return [WAITING_FOR_LEASE] if waits else []


def inputs_of_index(secret: Obj) -> Iterable[str]:
    """A durable inputs Secret, by the kind and name its labels name ("ns/Kind/name"): the
    snapshot keeps only those whose name is the object's too."""
    meta = secret["metadata"]
    labels = meta.get("labels") or {}
    kind, owner = labels.get(LABEL_KIND), labels.get(LABEL_NAME)
    if INPUTS_INFIX not in str(meta.get("name", "")) or not kind or not owner:
        return []
    return [f"{meta.get('namespace', '')}/{kind}/{owner}"]


def backup_of_index(secret: Obj) -> Iterable[str]:
    """A state backup, by its object's kind and name ("ns/Kind/name")."""
    meta = secret["metadata"]
    labels = meta.get("labels") or {}
    owner, kind = labels.get(LABEL_BACKUP_OF), labels.get(LABEL_KIND)
    return [f"{meta.get('namespace', '')}/{kind}/{owner}"] if owner and kind else []


def account_index(obj: Obj) -> Iterable[str]:
    """The runner ServiceAccount an object names (spec.jobs.serviceAccountName)."""
    account = (spec_of(obj).get("jobs") or {}).get("serviceAccountName")
    ns = obj.get("metadata", {}).get("namespace", "")
    return [f"{ns}/{account}"] if isinstance(account, str) and account else []


OBJECT_INDEXES: Final[dict[str, IndexFunc]] = {
    BY_NAMESPACE: namespace_index,
    BY_REF: ref_index,
    BY_CLUSTER: cluster_index,
    BY_OWNER: owner_index,
    BY_DEPENDENCY: dependency_index,
    BY_WAITING: waiting_index,
    BY_IDENTITY: identity_index,
    BY_ACCOUNT: account_index,
}
# A Machine's or MachinePool's informer (bootstrap_index reads the kind, which list items
# lack: the transform in caches.py restores it).
CAPI_INDEXES: Final[dict[str, IndexFunc]] = {BY_REF: bootstrap_index}
JOB_INDEXES: Final[dict[str, IndexFunc]] = {BY_UID: label_index(LABEL_UID)}
SECRET_INDEXES: Final[dict[str, IndexFunc]] = {
    BY_INPUTS_OF: inputs_of_index,
    BY_BACKUP_OF: backup_of_index,
    BY_MIRROR_OF: label_index(LABEL_IDENTITY_MIRROR),
}
LEASE_INDEXES: Final[dict[str, IndexFunc]] = {
    BY_NAMESPACE: namespace_index,
    BY_SCOPE: label_index(LABEL_SCOPE),
}
# The runner's ServiceAccounts, by namespace: the few a namespace's decisions read.
RUNNER_INDEXES: Final[dict[str, IndexFunc]] = {BY_NAMESPACE: namespace_index}
# A Pending runner pod, by its object's uid label (the Job's pod template carries it).
POD_INDEXES: Final[dict[str, IndexFunc]] = {BY_UID: label_index(LABEL_UID)}


def involved_index(event: Obj) -> Iterable[str]:
    involved = event.get("involvedObject") or {}
    ns = event.get("metadata", {}).get("namespace", "")
    return [f"{ns}/{involved['name']}"] if involved.get("name") else []


EVENT_INDEXES: Final[dict[str, IndexFunc]] = {BY_INVOLVED: involved_index}
