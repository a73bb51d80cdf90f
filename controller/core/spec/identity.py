"""Whose credentials an object runs with, and whether its namespace may use them.

An object names its credentials with spec.identityRef: kind Secret, a Secret in its own
namespace (the single-team form; v1alpha1's spec.credentialsRef converts to this), or
kind TerraformClusterIdentity, a cluster-scoped identity whose spec.secretRef names a
Secret in another namespace and whose spec.allowedNamespaces says which namespaces may
use it. A machine or pool without a reference inherits its TerraformCluster's.

The verdict (`verdict_of`) is a function of facts io reads: the identity, its Secret's
key names (never a value), and the namespace's labels. The using object shows it as its
IdentityAllowed condition; while it is False no Job of the object starts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, NamedTuple

from controller.core.basics.names import CLUSTER, IDENTITY, IdentityReason
from controller.core.spec.refs import IDENTITY_MIRROR_PREFIX, SECRET, cluster_of, spec_of
from runtime.jsonobj import Json

# The two kinds spec.identityRef may name.
IDENTITY_KINDS: Final = (IDENTITY, SECRET)


class IdentityRef(NamedTuple):
    kind: str  # IDENTITY or SECRET
    name: str


def own_identity_ref(spec: Json) -> IdentityRef | None:
    """The reference the spec itself makes: spec.identityRef."""
    ref = spec.get("identityRef")
    if isinstance(ref, dict) and ref.get("name"):
        return IdentityRef(str(ref.get("kind") or IDENTITY), str(ref["name"]))
    return None


def identity_ref_of(obj: Json, related: Mapping[tuple[str, str], Json]) -> IdentityRef | None:
    """The object's reference, or for a machine or pool without one its TerraformCluster's
    (found through its Cluster, as `cluster_of` finds it; None while that is unknown)."""
    own = own_identity_ref(spec_of(obj))
    if own is not None or obj.get("kind") == CLUSTER:
        return own
    cluster = related.get((CLUSTER, cluster_of(obj, related)))
    return own_identity_ref(spec_of(cluster)) if cluster is not None else None


def mirror_name(identity: str) -> str:
    """The Secret an identity's Secret is copied to in each namespace that uses it."""
    return f"{IDENTITY_MIRROR_PREFIX}{identity}"


def credentials_secret(ref: IdentityRef | None) -> str:
    """The Secret in the object's namespace that the runner gets: the named Secret, or the
    identity's mirror; "" without a reference."""
    if ref is None:
        return ""
    return ref.name if ref.kind == SECRET else mirror_name(ref.name)


# --- allowedNamespaces ---


def selector_matches(selector: Json, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels: every matchLabels entry and every
    matchExpressions requirement (In, NotIn, Exists, DoesNotExist) must hold; an empty
    selector matches everything. An unknown operator matches nothing."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_requirement(expr, labels) for expr in selector.get("matchExpressions") or [])


def _requirement(expr: Json, labels: Mapping[str, str]) -> bool:
    key, op = str(expr.get("key") or ""), expr.get("operator")
    values = {str(v) for v in expr.get("values") or []}
    match op:
        case "In":
            return key in labels and labels[key] in values
        case "NotIn":
            return key not in labels or labels[key] not in values
        case "Exists":
            return key in labels
        case "DoesNotExist":
            return key not in labels
    return False


def namespace_allowed(identity: Json, namespace: str, labels: Mapping[str, str]) -> bool:
    """spec.allowedNamespaces: the namespace is in `list`, or its labels match `selector`.
    Unset (or neither part set) allows none; an empty selector ({}) allows all."""
    allowed = spec_of(identity).get("allowedNamespaces")
    if not isinstance(allowed, dict):
        return False
    if namespace in {str(n) for n in allowed.get("list") or []}:
        return True
    selector = allowed.get("selector")
    return isinstance(selector, dict) and selector_matches(selector, labels)


def required_keys(identity: Json) -> frozenset[str]:
    """spec.requiredKeys: the keys the identity's Secret must hold (the variables the
    module's provider reads). Unset: none are checked."""
    return frozenset(str(k) for k in spec_of(identity).get("requiredKeys") or [])


def secret_ref_of(identity: Json) -> tuple[str, str]:
    """(namespace, name) of the identity's spec.secretRef."""
    ref = spec_of(identity).get("secretRef") or {}
    return str(ref.get("namespace") or ""), str(ref.get("name") or "")


# --- the verdict ---


@dataclass(frozen=True)
class IdentityView:
    """What io read for an object's identity: the identity (None: not found), its Secret's
    key names (None: the Secret is missing), the object's namespace's labels, and whether
    the namespace's mirror Secret exists. The default: nothing read."""

    identity: Json | None = None
    secret_keys: frozenset[str] | None = None
    namespace_labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    mirror: bool = False


NO_IDENTITY = IdentityView()


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: str  # an IdentityReason
    message: str

    @property
    def allowed(self) -> bool:
        return self.reason == IdentityReason.ALLOWED


def verdict_of(
    ref: IdentityRef, view: IdentityView, namespace: str, local_secrets: Iterable[str]
) -> Verdict:
    """Whether the object in `namespace` may run with `ref`. A kind Secret reference needs
    its Secret in `local_secrets` (the namespace's Secrets the snapshot holds); an
    identity needs to exist, allow the namespace, and have its Secret with the keys it
    requires. Messages name keys, never values."""
    if ref.kind == SECRET:
        if ref.name not in set(local_secrets):
            return Verdict(IdentityReason.SECRET_MISSING, f"Secret {ref.name} not found")
        return Verdict(IdentityReason.ALLOWED, f"Secret {ref.name} found")
    identity = view.identity
    if identity is None:
        return Verdict(IdentityReason.IDENTITY_NOT_FOUND, f"{IDENTITY} {ref.name} not found")
    if not namespace_allowed(identity, namespace, view.namespace_labels):
        message = f"{IDENTITY} {ref.name} does not allow namespace {namespace}"
        return Verdict(IdentityReason.NAMESPACE_NOT_ALLOWED, message)
    secret_ns, secret = secret_ref_of(identity)
    if view.secret_keys is None:
        message = f"{IDENTITY} {ref.name}: its Secret {secret_ns}/{secret} not found"
        return Verdict(IdentityReason.SECRET_MISSING, message)
    missing = sorted(required_keys(identity) - view.secret_keys)
    if missing:
        message = (
            f"{IDENTITY} {ref.name}: its Secret {secret_ns}/{secret} lacks the required "
            f"keys {', '.join(missing)}"
        )
        return Verdict(IdentityReason.SECRET_KEYS_MISSING, message)
    return Verdict(IdentityReason.ALLOWED, f"{IDENTITY} {ref.name} allows namespace {namespace}")


# --- who uses an identity ---


def identity_in_use(name: str, objects: Iterable[Json]) -> list[str]:
    """The objects that name identity `name` themselves, as "Kind namespace/name", sorted:
    the three kinds by spec.identityRef, their templates by spec.template.spec.identityRef.
    Machines and pools that inherit it do so through a TerraformCluster listed here. The
    controller holds the identity's finalizer while this is not empty; an admission check
    refusing the identity's deletion can call it on the objects it lists."""
    users = []
    for obj in objects:
        spec = spec_of(obj)
        template = (spec.get("template") or {}).get("spec")
        ref = own_identity_ref(template if isinstance(template, dict) else spec)
        if ref is not None and ref.kind == IDENTITY and ref.name == name:
            meta = obj.get("metadata") or {}
            users.append(f"{obj.get('kind', '')} {meta.get('namespace', '')}/{meta.get('name')}")
    return sorted(users)
