"""A finalizer added or removed, the one way both reconcilers write it (the objects'
and the identities'): a merge patch replaces the list whole, so the version read is
the precondition, and a finalizer another party added meanwhile is never dropped."""

from __future__ import annotations

from controller.io import api
from controller.io.api import Api
from runtime.errors import ApiError
from runtime.jsonobj import Json


async def add(client: Api, path: str, obj: Json, finalizer: str) -> Json:
    """`obj` (at `path`) with `finalizer` added over the version read; the answer."""
    meta = obj["metadata"]
    patch = {"metadata": {"finalizers": [*(meta.get("finalizers") or []), finalizer]}}
    return await api.merge_patch(client, path, patch, version=meta["resourceVersion"])


async def remove(client: Api, path: str, obj: Json, finalizer: str, *, missing_ok: bool) -> bool:
    """`finalizer` removed over the version read: True once removed; False when the
    object is gone already and `missing_ok` says that is what the step is for."""
    meta = obj["metadata"]
    kept = [f for f in meta.get("finalizers") or [] if f != finalizer]
    patch = {"metadata": {"finalizers": kept}}
    try:
        await api.merge_patch(client, path, patch, version=meta["resourceVersion"])
    except ApiError as err:
        if err.status != 404 or not missing_ok:
            raise
        return False
    return True
