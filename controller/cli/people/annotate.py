"""Setting a request annotation on an object, only if the object is as it was read."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.cli.people.common import Refused
from controller.io import api
from runtime.errors import ApiError
from runtime.transport import open_transport

MERGE = "application/merge-patch+json"


def annotate(kubeconfig: str | None, obj: dict[str, Any], notes: dict[str, str]) -> dict[str, Any]:
    """Merges `notes` into the object's annotations. The patch carries the resourceVersion
    read, so a request decided on a stale read fails instead of landing on a newer object."""
    return asyncio.run(_patch(kubeconfig, obj, notes))


async def _patch(
    kubeconfig: str | None, obj: dict[str, Any], notes: dict[str, str]
) -> dict[str, Any]:
    meta = obj["metadata"]
    path = api.object_path(obj["kind"], meta["namespace"], meta["name"])
    body = {"metadata": {"resourceVersion": meta["resourceVersion"], "annotations": notes}}
    async with open_transport(kubeconfig) as t:
        try:
            return await t.request("PATCH", path, body=body, content_type=MERGE)
        except ApiError as err:
            if err.status != 409:
                raise
            raise Refused(
                f"{obj['kind']}/{meta['name']} changed while this ran; run the command again"
            ) from None
