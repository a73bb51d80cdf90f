"""Carrying out a pass's TerraformPlan writes (controller/core/plan/plan_objects.py).

Creates first (AlreadyExists is success: the name is the waiting Job's, so the plan
there is this one), then each status as a merge patch of the fields the pass computed,
then the deletions of finished plans. A plan gone meanwhile (its object deleted, or
a person deleted it) is fine: the next pass makes it again if a Job still waits."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from controller.core import PlanWrites
from controller.io import api
from controller.io.api import MERGE, Api
from runtime.errors import ApiError


async def carry_out(client: Api, namespace: str, writes: PlanWrites) -> None:
    for body in writes.create:
        await api.create(client, api.plan_path(namespace), body)
    for name, status in writes.status:
        path = api.plan_path(namespace, name, sub="status")
        await _gone_is_fine(
            client.request("PATCH", path, body={"status": status}, content_type=MERGE)
        )
    for name in writes.delete:
        await _gone_is_fine(client.request("DELETE", api.plan_path(namespace, name)))


async def _gone_is_fine(request: Awaitable[dict[str, Any]]) -> None:
    try:
        await request
    except ApiError as err:
        if err.status != 404:
            raise
