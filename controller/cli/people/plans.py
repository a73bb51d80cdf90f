"""An object's TerraformPlans read from the cluster, and the one it waits on.

The controller says which plan waits: the one it made for the waiting Job, in phase
Pending. So approving reads only the object and its TerraformPlans, which the view
role and captf-plan-approver allow: an approver needs no Secret, Job or Lease."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from controller.cli.kinds import ref_of
from controller.cli.live import Source, listed
from controller.cli.people.annotate import patch_as_read
from controller.cli.people.common import Refused
from controller.core.basics.names import LABEL_UID, PLAN_KIND
from controller.core.basics.plan_summary import COUNTED
from controller.core.decide.approvals import Phase, spec_of, status_of
from controller.io import api
from runtime.errors import ApiError
from runtime.jsonobj import Json


@dataclass(frozen=True)
class Plans:
    """An object and its TerraformPlans, newest first."""

    kind: str
    name: str
    obj: Json
    plans: tuple[Json, ...]

    @property
    def who(self) -> str:
        return f"{self.kind}/{self.name}"


def read_plans(ref: str, *, source: Source) -> Plans:
    """The object `ref` (KIND/NAME) names and its TerraformPlans."""
    kind, name = ref_of(ref)
    obj, plans = asyncio.run(_read(source, kind, name))
    return Plans(kind, name, obj, tuple(sorted(plans, key=_created, reverse=True)))


def read_plan(name: str, *, source: Source) -> Json:
    """One TerraformPlan by name."""
    ns = _namespace(source)

    async def get() -> Json:
        async with source.open() as t:
            found = await t.request("GET", api.plan_path(ns, name))
            return {"apiVersion": found.get("apiVersion", ""), "kind": PLAN_KIND} | found

    return asyncio.run(get())


def _namespace(source: Source) -> str:
    if source.namespace is None:
        raise ValueError("a plan is read in one namespace")
    return source.namespace


async def _read(source: Source, kind: str, name: str) -> tuple[Json, list[Json]]:
    ns = _namespace(source)
    async with source.open() as t:
        try:
            obj = await t.request("GET", api.object_path(kind, ns, name))
        except ApiError as err:
            if err.status == 404:
                raise Refused(f"{kind}/{name} not found in namespace {ns}") from None
            raise
        uid = obj["metadata"]["uid"]
        plans = await listed(t, api.PLANS, PLAN_KIND, ns, labelSelector=f"{LABEL_UID}={uid}")
        return obj, plans


def _created(plan: Json) -> tuple[str, str]:
    meta = plan.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def phase_of(plan: Json) -> str:
    return str(status_of(plan).get("phase") or Phase.PENDING)


def waiting_plan(found: Plans) -> Json:
    """The plan the object waits on; refused, saying why, when none waits."""
    pending = [p for p in found.plans if phase_of(p) == Phase.PENDING]
    if pending and not status_of(pending[0]).get("fingerprint"):
        name = pending[0]["metadata"]["name"]
        raise Refused(f"TerraformPlan {name} shows no changes yet; run the command again")
    if pending:
        return pending[0]
    nxt = (found.obj.get("status") or {}).get("next") or {}
    said = f"{nxt.get('reason', '?')}: {nxt.get('message', '')}".rstrip(": ")
    approved = [p for p in found.plans if phase_of(p) == Phase.APPROVED]
    if approved:
        name = approved[0]["metadata"]["name"]
        raise Refused(
            f"nothing of {found.who} waits for approval: TerraformPlan {name} is approved "
            f"and its apply is due ({said})"
        )
    raise Refused(f"nothing of {found.who} waits for approval ({said})")


def approve(source: Source, plan: Json) -> Json:
    """Sets spec.approved, only on the version read: a plan that changed meanwhile (made
    for other changes, or superseded) is not approved blind."""
    meta = plan["metadata"]
    if spec_of(plan).get("approved") is True:
        raise Refused(f"TerraformPlan {meta['name']} is approved already")
    path = api.plan_path(meta["namespace"], meta["name"])
    who = f"TerraformPlan {meta['name']}"
    return patch_as_read(source, path, who, plan, {"spec": {"approved": True}})


def changes_text(plan: Json) -> str:
    """`1 to create, 0 to update, 1 to replace, 0 to delete`."""
    counts = status_of(plan).get("counts") or {}
    return ", ".join(f"{counts.get(a, 0)} to {a}" for a in COUNTED)
