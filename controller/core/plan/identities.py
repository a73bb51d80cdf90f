"""One pass over one TerraformClusterIdentity, as data: its mirrors, status and finalizer.

Kubernetes cannot hand a pod a Secret of another namespace, so the controller copies the
identity's Secret into each namespace that both uses the identity and is allowed to (the
mirror, `captf-creds-<identity>`), and deletes the copy from a namespace that stops
being allowed: that deletion is the revocation. Nothing else is copied, and no mirror is
owned by anything (an owner reference cannot cross namespaces).

The identity keeps the finalizer IDENTITY_FINALIZER while any object names it, so it
cannot go while something may still need it (a destroy included); once nothing does,
its mirrors are deleted and the finalizer goes.

Pure: io reads the facts (the identity, its Secret's key names and version, the users'
namespaces, the Namespaces' labels, the mirrors there are) and carries the pass out,
adding the Secret's data to each mirror it writes: no value passes through here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from controller.core.basics.names import (
    IDENTITY_FINALIZER,
    LABEL_IDENTITY_MIRROR,
    IdentityReason,
)
from controller.core.plan.status import merge_conditions, merge_patch
from controller.core.spec.identity import (
    mirror_name,
    namespace_allowed,
    required_keys,
    secret_ref_of,
)
from runtime.jsonobj import Json

# On a mirror: the identity's Secret and the resourceVersion it was copied from. A mirror
# of another version is written again.
ANN_MIRROR_OF: Final = "captf.io/identity-secret"
# An identity is woken by every change to itself, its Secret, the Namespaces and its
# users; this is only the fallback.
IDENTITY_RESYNC: Final = 600.0


@dataclass(frozen=True, slots=True)
class SourceSecret:
    """The identity's Secret as io read it: its key names and resourceVersion."""

    keys: frozenset[str]
    version: str


@dataclass(frozen=True)
class IdentityPass:
    # Mirrors to create or replace, as metadata (io adds the Secret's data).
    write: tuple[Json, ...] = ()
    delete: tuple[str, ...] = ()  # namespaces whose mirror goes
    status: Json | None = None  # a merge patch of status; None: unchanged
    add_finalizer: bool = False
    remove_finalizer: bool = False
    requeue: float = IDENTITY_RESYNC


def identity_pass(
    identity: Json,
    *,
    source: SourceSecret | None,
    users: Mapping[str, list[str]],
    namespace_labels: Mapping[str, Mapping[str, str]],
    mirrors: Mapping[str, Json],
    now: datetime,
) -> IdentityPass:
    """`users`: namespace -> the objects there that name the identity ("Kind ns/name");
    `mirrors`: namespace -> the mirror found there (its metadata)."""
    meta = identity.get("metadata") or {}
    name = str(meta.get("name") or "")
    deleting = bool(meta.get("deletionTimestamp"))
    ready, reason, message = _secret_state(identity, source)
    wanted = sorted(
        ns
        for ns in users
        if ready and namespace_allowed(identity, ns, namespace_labels.get(ns) or {})
    )
    version = _mirror_of(identity, source)
    write = tuple(
        mirror_metadata(name, ns, version)
        for ns in wanted
        if _annotation(mirrors.get(ns)) != version
    )
    delete = tuple(sorted(ns for ns in mirrors if ns not in wanted))
    finalizers = meta.get("finalizers") or []
    in_use = any(users.values())
    old = identity.get("status") or {}
    cond = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": reason,
        "message": message,
    }
    new = dict(old) | {
        "observedGeneration": meta.get("generation", 0),
        "namespaces": wanted,
        "users": sum(len(found) for found in users.values()),
        "conditions": merge_conditions(old.get("conditions") or [], [cond], now),
    }
    return IdentityPass(
        write=write,
        delete=delete,
        status=merge_patch(old, new),
        add_finalizer=in_use and not deleting and IDENTITY_FINALIZER not in finalizers,
        remove_finalizer=deleting and not in_use and IDENTITY_FINALIZER in finalizers,
    )


def _secret_state(identity: Json, source: SourceSecret | None) -> tuple[bool, str, str]:
    """Ready, its reason and message: the Secret exists and holds the required keys."""
    ns, secret = secret_ref_of(identity)
    if source is None:
        return False, IdentityReason.SECRET_MISSING, f"Secret {ns}/{secret} not found"
    missing = sorted(required_keys(identity) - source.keys)
    if missing:
        text = f"Secret {ns}/{secret} lacks the required keys {', '.join(missing)}"
        return False, IdentityReason.SECRET_KEYS_MISSING, text
    return True, "SecretFound", f"Secret {ns}/{secret} found"


def _mirror_of(identity: Json, source: SourceSecret | None) -> str:
    ns, secret = secret_ref_of(identity)
    return f"{ns}/{secret}@{source.version if source else ''}"


def _annotation(mirror: Json | None) -> str | None:
    if mirror is None:
        return None
    return ((mirror.get("metadata") or {}).get("annotations") or {}).get(ANN_MIRROR_OF)


def mirror_metadata(identity: str, namespace: str, version: str) -> Json:
    """A mirror without its data: labelled with its identity, annotated with the Secret and
    version it copies, owned by nothing."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": mirror_name(identity),
            "namespace": namespace,
            "labels": {LABEL_IDENTITY_MIRROR: identity},
            "annotations": {ANN_MIRROR_OF: version},
        },
        "type": "Opaque",
    }
