"""What an object's spec refers to: the one reader of each reference.

Which cluster an object belongs to, which Secrets and ConfigMaps it reads, which
objects it waits for: the rules that wait on them (controller/core/decide) and the
indexes that wake an object when one of them changes (controller/io/caches.py) ask
here, so the two cannot disagree. A reference without a name reads as "", absent.

The readers take the spec, except `cluster_of`, which takes the object: where an
object's cluster is written is about to change (Cluster API owners), and every caller
already asks this one function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, NamedTuple

Json = dict[str, Any]
SECRET: Final = "Secret"
CONFIGMAP: Final = "ConfigMap"


class ObjectRef(NamedTuple):
    """A CAPTF object in the referring object's namespace (a key of Snapshot.related)."""

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


def cluster_of(obj: Json) -> str:
    """The TerraformCluster a pool or machine belongs to: spec.clusterRef."""
    return _name(spec_of(obj).get("clusterRef"))


def credentials_of(spec: Json) -> str:
    """The credentials Secret: spec.credentialsRef."""
    return _name(spec.get("credentialsRef"))


def module_configmap(spec: Json) -> str:
    """The ConfigMap holding the module's files: spec.module.configMapRef."""
    return _name((spec.get("module") or {}).get("configMapRef"))


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


def _name(ref: object) -> str:
    return str((ref if isinstance(ref, dict) else {}).get("name") or "")


# What a Cluster API Cluster refers to. Separate from the readers above, which read a
# CAPTF object's own spec: this one reads the Cluster object, as the snapshot's
# `related` holds it under ObjectRef("Cluster", name).
INFRASTRUCTURE_KIND: Final = "TerraformCluster"


def infrastructure_cluster_of(cluster: Json | None) -> str:
    """The TerraformCluster a Cluster names as its infrastructure
    (Cluster.spec.infrastructureRef), or "" when it names none or another kind."""
    ref = spec_of(cluster or {}).get("infrastructureRef")
    if not isinstance(ref, dict) or ref.get("kind") not in (None, INFRASTRUCTURE_KIND):
        return ""
    return _name(ref)
