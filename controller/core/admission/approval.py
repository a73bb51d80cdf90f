"""Who approved a TerraformPlan: recorded by the webhook from the request's user.

`spec.approvedBy` is never the requester's word. When `spec.approved` turns true, the
webhook writes the user the API server authenticated; while it stays true the record
stays as it was; a plan never approved has no approver. A request that names anyone
else is refused, so a record can only be the truth or absent. (An approval is never
withdrawn: the validating webhook refuses `approved` turning false.)"""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.admission.refusal import Refusal
from runtime.jsonobj import Json

FIELD = "spec.approvedBy"
_PATH = "/spec/approvedBy"


@dataclass(frozen=True)
class Approval:
    """The JSON patch to apply to the request's object, or the refusal."""

    patch: tuple[Json, ...] = ()
    refusal: Refusal | None = None


def _spec(obj: Json | None) -> Json:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _set(value: str) -> Approval:
    return Approval(patch=({"op": "add", "path": _PATH, "value": value},))


def approval(old: Json | None, new: Json, username: str) -> Approval:
    """What to do with a create (`old` None) or update of a plan by `username`."""
    before, after = _spec(old), _spec(new)
    was_approved, approved = before.get("approved") is True, after.get("approved") is True
    recorded, asked = before.get("approvedBy"), after.get("approvedBy")
    if asked is not None and asked != recorded and asked != username:
        return Approval(refusal=Refusal(FIELD, "may only be set by the webhook, to the approver"))
    if not approved:
        # No approval, no approver.
        return (
            Approval(patch=({"op": "remove", "path": _PATH},))
            if "approvedBy" in after
            else Approval()
        )
    if not was_approved:
        return Approval() if asked == username else _set(username)
    if asked == recorded:
        return Approval()
    if asked is None and isinstance(recorded, str):
        return _set(recorded)  # dropped by a replace: the record stays
    return Approval(refusal=Refusal(FIELD, "records who approved and does not change"))
