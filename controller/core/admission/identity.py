"""Credentials: the identity's own shape, and which Secret a requester must be able to read.

Whoever points CAPTF at a Secret lends its values to a runner, and through the module to
anything the module prints or sends. So the requester must be able to `get` that Secret
themselves (a SubjectAccessReview, asked by the webhook), or CAPTF would be a confused
deputy that reads Secrets for people who may not:

- an object whose `spec.identityRef` is `{kind: Secret}`: that Secret in its namespace;
- a TerraformClusterIdentity: its `spec.secretRef`, whoever creates or changes it.

An object that names a TerraformClusterIdentity is not asked to read the identity's
Secret: that is what an identity is for (teams use credentials they cannot read), and
its `allowedNamespaces` is the platform team's consent, checked by the controller."""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.admission.kinds import IDENTITY
from controller.core.admission.refusal import Refusal
from runtime.jsonobj import Json

SECRET = "Secret"
REF_KINDS = (IDENTITY, SECRET)


@dataclass(frozen=True)
class SecretAccess:
    """A Secret the requester must be able to `get`, and the field that names it."""

    namespace: str
    name: str
    field: str

    def refusal(self) -> Refusal:
        return Refusal(self.field, "names a Secret the requester may not get")


def _mapping(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def ref_refusals(spec: Json, prefix: str = "spec") -> list[Refusal]:
    """spec.identityRef, when given, names a kind it may and a name."""
    if "identityRef" not in spec:
        return []
    ref = _mapping(spec.get("identityRef"))
    found = []
    if ref.get("kind") not in REF_KINDS:
        found.append(
            Refusal(f"{prefix}.identityRef.kind", f"must be one of {', '.join(REF_KINDS)}")
        )
    if not isinstance(ref.get("name"), str) or not ref["name"]:
        found.append(Refusal(f"{prefix}.identityRef.name", "is required"))
    return found


def identity_refusals(identity: Json) -> list[Refusal]:
    """A TerraformClusterIdentity names its Secret fully; allowedNamespaces is well formed."""
    spec = _mapping(identity.get("spec"))
    ref = _mapping(spec.get("secretRef"))
    found = [
        Refusal(f"spec.secretRef.{key}", "is required")
        for key in ("name", "namespace")
        if not isinstance(ref.get(key), str) or not ref[key]
    ]
    allowed = spec.get("allowedNamespaces")
    if allowed is not None:
        listed = _mapping(allowed).get("list")
        if not isinstance(allowed, dict) or not (
            listed is None or (isinstance(listed, list) and all(isinstance(n, str) for n in listed))
        ):
            found.append(
                Refusal("spec.allowedNamespaces.list", "must be a list of namespace names")
            )
        elif allowed.get("selector") is not None and not isinstance(allowed["selector"], dict):
            found.append(Refusal("spec.allowedNamespaces.selector", "must be a label selector"))
    return found


def secret_to_review(kind: str, obj: Json, spec: Json, prefix: str = "spec") -> SecretAccess | None:
    """The Secret the requester of `obj` (whose inputs spec is `spec` at `prefix`) must be
    able to read, or None."""
    if kind == IDENTITY:
        ref = _mapping(_mapping(obj.get("spec")).get("secretRef"))
        namespace, name = ref.get("namespace"), ref.get("name")
        if isinstance(namespace, str) and isinstance(name, str) and namespace and name:
            return SecretAccess(namespace, name, "spec.secretRef")
        return None
    ref = _mapping(spec.get("identityRef"))
    namespace = _mapping(obj.get("metadata")).get("namespace")
    if ref.get("kind") == SECRET and isinstance(ref.get("name"), str) and namespace:
        return SecretAccess(str(namespace), ref["name"], f"{prefix}.identityRef")
    return None
