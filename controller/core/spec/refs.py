"""What an object's spec refers to: the one reader of each reference.

Whom an object acts for, which Secrets and ConfigMaps it reads, which objects it
waits for: the rules that wait on them (controller/core/decide) and the indexes that
wake an object when one of them changes (controller/io/caches.py) ask here, so the two
cannot disagree. A reference without a name reads as "", absent.

Owners (Cluster API, contract v1beta2): a TerraformCluster acts for the Cluster that
owns it; a TerraformMachine for its owner Machine, a TerraformMachinePool for its owner
MachinePool, and both for the Cluster their `cluster.x-k8s.io/cluster-name` label
names. A member finds its TerraformCluster through that Cluster's infrastructureRef.
The readers of owners take the object (its metadata); the others take the spec."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

from controller.core.basics.names import (
    CAPI_CLUSTER,
    CAPI_GROUP,
    CAPI_POOL,
    CLUSTER,
    GROUP,
    LABEL_CLUSTER_NAME,
    OWNER_KINDS,
)
from controller.core.spec.image import pinned, reference_digest
from runtime.jsonobj import Json

SECRET: Final = "Secret"
# An identity's Secret, copied into a namespace that uses it, is named by this prefix and
# the identity's name.
IDENTITY_MIRROR_PREFIX: Final = "captf-creds-"
CONFIGMAP: Final = "ConfigMap"


class ObjectRef(NamedTuple):
    """An object in the referring object's namespace (a key of Snapshot.related): a CAPTF
    object, or a Cluster API Cluster, Machine or MachinePool."""

    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class VariableSource:
    """One variablesFrom entry: a Secret or a ConfigMap, and the one key taken from it
    ("": every key)."""

    kind: str  # SECRET or CONFIGMAP
    name: str
    key: str


def spec_of(obj: Json) -> Json:
    found: Json = obj.get("spec") or {}
    return found


def owner_of(obj: Json) -> ObjectRef | None:
    """The Cluster API object a CAPTF object acts for: its owner reference of the kind its
    own kind answers to (OWNER_KINDS), in Cluster API's group, the controller one first."""
    kind = OWNER_KINDS.get(str(obj.get("kind", "")))
    refs = [
        ref
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []
        if ref.get("kind") == kind and _group(ref.get("apiVersion")) == CAPI_GROUP
    ]
    refs.sort(key=lambda ref: not ref.get("controller"))
    name = str(refs[0].get("name") or "") if refs and kind else ""
    return ObjectRef(str(kind), name) if name else None


def cluster_name_of(obj: Json) -> str:
    """The Cluster API Cluster an object belongs to: a TerraformCluster's owner; for any
    other object (a member, a Machine, a MachinePool) the cluster-name label."""
    if obj.get("kind") == CLUSTER:
        owner = owner_of(obj)
        return owner.name if owner is not None else ""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return str(labels.get(LABEL_CLUSTER_NAME) or "")


def capi_cluster_ref(obj: Json) -> ObjectRef | None:
    """The Cluster's key in a snapshot's `related`, if the object names one."""
    name = cluster_name_of(obj)
    return ObjectRef(CAPI_CLUSTER, name) if name else None


def infrastructure_ref(owner: Json) -> Json:
    """The owner's infrastructureRef ({apiGroup, kind, name}): a Cluster's and a Machine's
    in spec, a MachinePool's in its template."""
    spec = spec_of(owner)
    if owner.get("kind") == CAPI_POOL:
        spec = (spec.get("template") or {}).get("spec") or {}
    found = spec.get("infrastructureRef")
    return found if isinstance(found, dict) else {}


def names_captf(ref: Json, kind: str, name: str | None = None) -> bool:
    """Whether an infrastructureRef names a CAPTF object of `kind` (and `name`): an
    apiGroup, when given, must be CAPTF's."""
    group = ref.get("apiGroup")
    if group and group != GROUP:
        return False
    return ref.get("kind") == kind and (name is None or ref.get("name") == name)


def terraform_cluster_of(cluster: Json | None) -> str:
    """The TerraformCluster a Cluster's infrastructureRef names; "" when it names another
    kind or nothing."""
    ref = infrastructure_ref(cluster or {})
    return str(ref.get("name") or "") if names_captf(ref, CLUSTER) else ""


def cluster_of(obj: Json, related: Mapping[tuple[str, str], Json]) -> str:
    """The TerraformCluster an object's family is named after: a TerraformCluster's own
    name; a member's, through its Cluster in `related` ("" while that is not known)."""
    if obj.get("kind") == CLUSTER:
        return str((obj.get("metadata") or {}).get("name") or "")
    ref = capi_cluster_ref(obj)
    return terraform_cluster_of(related.get(ref)) if ref is not None else ""


def bootstrap_secret_of(owner: Json | None) -> str:
    """The bootstrap data Secret a Machine (spec.bootstrap) or a MachinePool (its
    template's) names: dataSecretName, "" while unset."""
    spec = spec_of(owner or {})
    if (owner or {}).get("kind") == CAPI_POOL:
        spec = (spec.get("template") or {}).get("spec") or {}
    return str((spec.get("bootstrap") or {}).get("dataSecretName") or "")


def credentials_of(spec: Json) -> str:
    """The Secret in the object's namespace that the spec's own reference hands the
    runner: spec.identityRef of kind Secret, or for kind TerraformClusterIdentity the
    identity's mirror there. A machine or pool without a reference inherits its
    cluster's (controller/core/spec/identity.py)."""
    ref = spec.get("identityRef")
    if isinstance(ref, dict) and ref.get("name"):
        name = str(ref["name"])
        return name if ref.get("kind") == SECRET else f"{IDENTITY_MIRROR_PREFIX}{name}"
    return ""


def local_credentials_of(spec: Json) -> str:
    """The user's own Secret the spec names as credentials (kind Secret); "" for an
    identity or no reference."""
    ref = spec.get("identityRef")
    if isinstance(ref, dict) and ref.get("name"):
        return str(ref["name"]) if ref.get("kind") == SECRET else ""
    return ""


def module_configmap(spec: Json) -> str:
    """The ConfigMap holding the module's files: spec.source.configMapRef."""
    return _name((spec.get("source") or {}).get("configMapRef"))


@dataclass(frozen=True, slots=True)
class ModuleImage:
    """spec.source.image: a module image's reference and when to pull it (the container
    pull policies; unset reads as IfNotPresent, as for any image whose policy the
    image volume is not given)."""

    reference: str
    pull_policy: str = "IfNotPresent"
    # The digest the Job runs (controller/core/decide/pinning.py chooses it): the pin of
    # the durable inputs, a fresh lookup's, or the reference's own; "" when none is known.
    digest: str = ""

    @property
    def volume_reference(self) -> str:
        """What the Job's image volume names: `repository@digest` once a digest is known,
        so what ran is known by construction."""
        return pinned(self.reference, self.digest)


def module_image(spec: Json) -> ModuleImage | None:
    """The module image of spec.source.image; None for a ConfigMap source. The API
    server admits exactly one of configMapRef and image."""
    source = spec.get("source") or {}
    reference = str(source.get("image") or "")
    if not reference:
        return None
    policy = str(source.get("imagePullPolicy") or "IfNotPresent")
    return ModuleImage(reference, policy, reference_digest(reference))


def variable_sources(spec: Json) -> list[VariableSource]:
    """spec.variablesFrom, in order (later entries win). The API server admits exactly one
    of secretRef and configMapRef per entry; an entry without a configMapRef reads as a
    Secret, so a malformed one is reported as a missing Secret."""
    sources: list[VariableSource] = []
    for entry in spec.get("variablesFrom") or []:
        kind = CONFIGMAP if (entry or {}).get("configMapRef") else SECRET
        ref = (entry or {}).get("configMapRef" if kind == CONFIGMAP else "secretRef") or {}
        sources.append(VariableSource(kind, _name(ref), str(ref.get("key") or "")))
    return sources


def secrets_read(spec: Json) -> list[str]:
    """The user's Secrets the spec names: the credentials, then the variables' Secrets."""
    names = [credentials_of(spec)]
    names += [s.name for s in variable_sources(spec) if s.kind == SECRET]
    return [name for name in names if name]


def configmaps_read(spec: Json) -> list[str]:
    """The ConfigMaps the spec names, each once: the module, then the variables'."""
    names = [module_configmap(spec)]
    names += [s.name for s in variable_sources(spec) if s.kind == CONFIGMAP]
    return list(dict.fromkeys(name for name in names if name))


def dependencies(spec: Json) -> list[ObjectRef]:
    """spec.dependsOn: the objects that must be Ready first."""
    return [
        ObjectRef(str(dep.get("kind", "")), str(dep.get("name", "")))
        for dep in spec.get("dependsOn") or []
    ]


def _group(api_version: object) -> str:
    text = str(api_version or "")
    return text.split("/", 1)[0] if "/" in text else ""


def _name(ref: object) -> str:
    return str((ref if isinstance(ref, dict) else {}).get("name") or "")
