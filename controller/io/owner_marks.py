"""Carrying out a remediation mark on the owner Machine (controller/core/decide/remediation.py).

The patch is a merge patch of the two remediation annotations alone: the Machine's other
metadata is Cluster API's and the user's, and a merge patch leaves it alone. It needs no
precondition: setting or removing the same two keys twice is doing it once. A Machine
gone meanwhile (404) has nothing to mark."""

from __future__ import annotations

from controller.core import OwnerMark
from controller.core.basics.names import CAPI_MACHINE
from controller.io import api
from controller.io.api import Api
from runtime.errors import ApiError


async def carry_out(client: Api, namespace: str, mark: OwnerMark) -> bool:
    """Patches the Machine; False when it is gone."""
    path = api.resource_path(api.CAPI_OBJECTS[CAPI_MACHINE], namespace, mark.machine)
    try:
        await api.merge_patch(client, path, mark.patch)
    except ApiError as err:
        if err.status != 404:
            raise
        return False
    return True
