"""Who wakes whom around a TerraformClusterIdentity (handlers.py wires them, and wakes
for a Namespace whose labels change, every identity and the objects there that run with
one): an identity wakes itself and the objects that run with it; an identity's Secret,
the identity and its users (a mirror: its namespace's users); an object's reference to
an identity, that identity when the reference comes or goes. Every fan-out goes through
an index (indexes.py)."""

from __future__ import annotations

from collections.abc import Iterable

from controller.core import (
    cluster_name_of,
    identity_ref_of,
    own_identity_ref,
    secret_ref_of,
    spec_of,
)
from controller.core.basics.names import CLUSTER, IDENTITY
from controller.io.caches import Caches
from controller.io.indexes import BY_CLUSTER, BY_IDENTITY
from controller.io.keys import key_for, key_of
from runtime.cache.resource import Obj
from runtime.jsonobj import Json


def identity_key(name: str) -> str:
    """An identity's key: cluster-scoped, so its namespace is empty."""
    return key_of(IDENTITY, "", name)


def identity_wakes(caches: Caches, old: Obj | None, new: Obj | None) -> list[str]:
    """The identity, and its users when what they read of it changed (its spec, its
    coming or going): not on the controller's own status and finalizer writes."""
    obj = new or old
    assert obj is not None
    name = obj["metadata"]["name"]
    keys = [identity_key(name)]
    if old is None or new is None or old.get("spec") != new.get("spec"):
        keys += _keys(identity_users(caches, name))
    return keys


def named_identities(old: Obj | None, new: Obj | None) -> list[str]:
    """The identities an object's own reference names, when it comes, changes or goes."""
    refs = [own_identity_ref(spec_of(o)) if o is not None else None for o in (old, new)]
    if old is not None and new is not None and refs[0] == refs[1]:
        return []
    return [identity_key(ref.name) for ref in refs if ref is not None and ref.kind == IDENTITY]


def secret_identities(caches: Caches, ns: str, name: str, mirror_of: str | None) -> list[str]:
    keys = (
        [identity_key(mirror_of), *_keys(identity_users(caches, mirror_of, ns))]
        if mirror_of
        else []
    )
    for identity in caches.identities.store:
        if secret_ref_of(identity) == (ns, name):
            found = identity["metadata"]["name"]
            keys += [identity_key(found), *_keys(identity_users(caches, found))]
    return keys


def identity_users(caches: Caches, name: str, namespace: str | None = None) -> list[Json]:
    """The objects that run with identity `name` (in `namespace`, or anywhere): those
    naming it, and the machines and pools of such a TerraformCluster that name none."""
    direct = caches.objects_by(BY_IDENTITY, name)
    if namespace is not None:
        direct = [o for o in direct if o["metadata"]["namespace"] == namespace]
    found = list(direct)
    for cluster in (o for o in direct if o["kind"] == CLUSTER):
        ns = cluster["metadata"]["namespace"]
        for member in caches.objects_by(BY_CLUSTER, f"{ns}/{cluster_name_of(cluster)}"):
            ref = identity_ref_of(member, {})
            if member["kind"] != CLUSTER and ref is None:
                found.append(member)
    return found


def _keys(objects: Iterable[Json]) -> list[str]:
    return [key_for(obj) for obj in objects]
