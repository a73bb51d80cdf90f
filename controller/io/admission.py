"""The controller's admission webhooks: the checks of controller/core/admission, served.

POST /validate takes every CAPTF kind (dispatch on the request's kind): on a create, the
object's own checks; on an update, what may not change, and the object's own checks when
its spec changed. An update that leaves the spec as it is passes: owner references,
finalizers and labels are written by Cluster API and by the controller itself, and an
object stored while the webhook was down must still be deletable. When the object names
a Secret the requester must be able to read (controller/core/admission/identity.py), a
SubjectAccessReview asks the API server whether the requester may `get` it.

A TerraformPolicy's rules are compiled, type-checked and costed (controller/policy/
admission.py): an expression that does not compile, is not a condition or is too costly
is refused with its position.

POST /mutate-terraformplan records who approved a TerraformPlan (spec.approvedBy).

POST /convert is the CRDs' conversion webhook: an object of any CAPTF kind as v1alpha1 or
v1beta1 (controller/core/conversion), for whoever reads or writes it in the version it is
not stored in. The admission rules name v1beta1 only; the API server converts a v1alpha1
request before reviewing it (matchPolicy Equivalent), so the checks read one version.

The deletion of a TerraformClusterIdentity that an object still names is refused (the
objects are listed from the API server: a deletion is rare, and a cache could be a
moment behind a create). The identity's finalizer holds it anyway when the webhook is
not called.

Refusals name the object, the field and the rule, never a value."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from controller.core import (
    ADMISSION_KINDS,
    ConversionFailed,
    SecretAccess,
    approval,
    convert,
    identity_in_use,
    inputs_spec,
    refusals_message,
    secret_to_review,
    spec_refusals,
    update_refusals,
)
from controller.core.basics.names import GROUP, VERSION
from controller.policy.admission import refusals as policy_refusals
from runtime.admission import ALLOW, Answer, Review
from runtime.conversion import Convert, Refused
from runtime.errors import ApiError
from runtime.jsonobj import Json

log = logging.getLogger("captf.admission")
PLAN = "TerraformPlan"
POLICY = "TerraformPolicy"
IDENTITY = "TerraformClusterIdentity"
# The objects whose Jobs use an identity, as for its finalizer. A template naming one is
# not a user until an object is made from it (and the controller may not read templates).
IDENTITY_USERS = ("terraformclusters", "terraformmachines", "terraformmachinepools")
# Enough to show who uses it; the rest is counted.
SHOWN_USERS = 5
VALIDATE_PATH = "/validate"
MUTATE_PLAN_PATH = "/mutate-terraformplan"
CONVERT_PATH = "/convert"
SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class Api(Protocol):
    async def request(self, method: str, path: str, *, body: object = None) -> dict[str, Any]: ...


def converted(obj: Json, api_version: str) -> Json:
    try:
        return convert(obj, api_version)
    except ConversionFailed as failed:
        raise Refused(str(failed)) from None


def _kind(request: Json) -> str | None:
    """The request's kind when it is one of ours, else None."""
    kind = request.get("kind") or {}
    if kind.get("group") != GROUP or kind.get("kind") not in ADMISSION_KINDS:
        return None
    return str(kind["kind"])


def _refused(kind: str, obj: Json, message: str) -> Answer:
    name = (obj.get("metadata") or {}).get("name") or (obj.get("metadata") or {}).get(
        "generateName", ""
    )
    return Answer(allowed=False, message=f"{kind} {name}: {message}")


class Webhooks:
    """The reviews, with the API server to ask about access."""

    def __init__(self, api: Api) -> None:
        self._api = api

    def reviews(self) -> dict[str, Review]:
        return {VALIDATE_PATH: self.validate, MUTATE_PLAN_PATH: self.mutate_plan}

    def conversions(self) -> dict[str, Convert]:
        return {CONVERT_PATH: converted}

    async def validate(self, request: Json) -> Answer:
        kind = _kind(request)
        operation = request.get("operation")
        obj, old = request.get("object") or {}, request.get("oldObject") or {}
        if kind == IDENTITY and operation == "DELETE":
            return await self._identity_deletion(old)
        if kind is None or operation not in ("CREATE", "UPDATE"):
            return ALLOW
        if operation == "UPDATE":
            if obj.get("spec") == old.get("spec"):
                return ALLOW
            refused = update_refusals(kind, old, obj, dry_run=request.get("dryRun") is True)
        else:
            refused = spec_refusals(kind, obj)
        if kind == POLICY:
            refused = [*refused, *policy_refusals(obj)]
        if refused:
            return _refused(kind, obj, refusals_message(refused))
        found = inputs_spec(kind, obj)
        prefix, spec = found if found is not None else ("spec", {})
        access = secret_to_review(kind, obj, spec, prefix)
        # Every spec change, not only a change of the Secret: whoever changes what the
        # runner does with the credentials (its module, its variables) uses them.
        if access is not None:
            return await self._may_read(kind, obj, access, request.get("userInfo") or {})
        return ALLOW

    async def mutate_plan(self, request: Json) -> Answer:
        if _kind(request) != PLAN or request.get("operation") not in ("CREATE", "UPDATE"):
            return ALLOW
        obj, old = request.get("object") or {}, request.get("oldObject")
        username = str((request.get("userInfo") or {}).get("username", ""))
        found = approval(old, obj, username)
        if found.refusal is not None:
            return _refused(PLAN, obj, found.refusal.message)
        return Answer(allowed=True, patch=found.patch)

    async def _identity_deletion(self, identity: Json) -> Answer:
        """Refused while an object names the identity: its Jobs would lose their
        credentials, a destroy among them."""
        name = str((identity.get("metadata") or {}).get("name", ""))
        objects: list[Json] = []
        try:
            for plural in IDENTITY_USERS:
                listed = await self._api.request("GET", f"/apis/{GROUP}/{VERSION}/{plural}")
                kind = str(listed.get("kind", "")).removesuffix("List")
                objects.extend({**obj, "kind": kind} for obj in listed.get("items") or [])
        except ApiError as error:
            log.warning("listing the users of identity %s failed: %s", name, error.status)
            message = "cannot list the objects that may use it; try again"
            return _refused(IDENTITY, identity, message)
        users = identity_in_use(name, objects)
        if not users:
            return ALLOW
        shown = ", ".join(users[:SHOWN_USERS])
        more = f" and {len(users) - SHOWN_USERS} more" if len(users) > SHOWN_USERS else ""
        return _refused(
            IDENTITY, identity, f"in use by {shown}{more}; delete or repoint them first"
        )

    async def _may_read(self, kind: str, obj: Json, access: SecretAccess, user: Json) -> Answer:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user.get("username", ""),
                "uid": user.get("uid", ""),
                "groups": user.get("groups") or [],
                "extra": user.get("extra") or {},
                "resourceAttributes": {
                    "namespace": access.namespace,
                    "verb": "get",
                    "resource": "secrets",
                    "name": access.name,
                },
            },
        }
        try:
            decided = await self._api.request("POST", SAR_PATH, body=review)
        except ApiError as error:
            # Not known to be allowed: refused, and the requester may simply try again.
            log.warning("SubjectAccessReview failed: %s %s", error.status, error.reason)
            message = f"{access.field}: cannot check access to the Secret it names; try again"
            return _refused(kind, obj, message)
        if (decided.get("status") or {}).get("allowed"):
            return ALLOW
        return _refused(kind, obj, access.refusal().message)
