"""The storage version migration's rules, over a CRD as the API server returns it.

The API server keeps an object in the version that was the storage version when it was
last written, and lists in `status.storedVersions` every version it may have kept one
in. Rewriting an object (any write, an empty patch included) stores it in today's
storage version; once every object of a CRD has been rewritten, the older versions can
leave storedVersions, and with them the need to ever convert from them (a later release
may then stop serving v1alpha1: the API server refuses to drop a version still listed).
Which version one object is stored in, the API does not say: every object is rewritten."""

from __future__ import annotations

from runtime.jsonobj import Json


def storage_version(crd: Json) -> str | None:
    """The version the CRD stores objects in now."""
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("storage"):
            return str(version["name"])
    return None


def stale_versions(crd: Json) -> list[str]:
    """Versions objects may still be stored in besides the storage version: while any is
    left, the CRD's objects are to be rewritten."""
    storage = storage_version(crd)
    stored = (crd.get("status") or {}).get("storedVersions") or []
    return [str(v) for v in stored if v != storage]


def rewrites_through_status(crd: Json) -> bool:
    """Whether an object is best rewritten through its status subresource: a write there
    stores the whole object, and touches neither its spec nor its generation (so no
    admission webhook, no new apply), with the status permission the controller holds."""
    storage = storage_version(crd)
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == storage:
            return "status" in (version.get("subresources") or {})
    return False


def trimmed(crd: Json) -> Json:
    """The merge patch of the CRD's status that leaves only the storage version stored."""
    return {"status": {"storedVersions": [storage_version(crd)]}}
