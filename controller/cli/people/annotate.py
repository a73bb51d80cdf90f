"""Merge patches that land only on the object as it was read: a request annotation on
an object, an approval on a TerraformPlan."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.cli.live import Source
from controller.cli.people.common import Refused
from controller.io import api
from runtime.errors import ApiError
from runtime.transport import MERGE_PATCH

MERGE = MERGE_PATCH


def annotate(source: Source, obj: dict[str, Any], notes: dict[str, str]) -> dict[str, Any]:
    """Merges `notes` into the object's annotations, only on the version read."""
    meta = obj["metadata"]
    path = api.object_path(obj["kind"], meta["namespace"], meta["name"])
    who = f"{obj['kind']}/{meta['name']}"
    return patch_as_read(source, path, who, obj, {"metadata": {"annotations": notes}})


def patch_as_read(
    source: Source, path: str, who: str, obj: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    """Merges `body` into `obj` at `path`. The patch carries the resourceVersion read, so a
    request decided on a stale read fails (Refused, naming `who`) instead of landing on a
    newer object."""
    version = {"resourceVersion": obj["metadata"]["resourceVersion"]}
    guarded = body | {"metadata": (body.get("metadata") or {}) | version}

    async def patch() -> dict[str, Any]:
        async with source.open() as t:
            try:
                return await t.request("PATCH", path, body=guarded, content_type=MERGE)
            except ApiError as err:
                if err.status != 409:
                    raise
                raise Refused(f"{who} changed while this ran; run the command again") from None

    return asyncio.run(patch())
