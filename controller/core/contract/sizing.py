"""Who sizes a pool's group: the MachinePool's `spec.replicas`, or the cloud.

Cluster API's convention for MachinePools, as its `ReplicasManagedByExternalAutoscaler`
reads it (and the AWS, Azure and OCI providers with it): the annotation
`cluster.x-k8s.io/replicas-managed-by`, of any value but "false", says something outside
Cluster API sizes the group. It is the user's to set; CAPTF never sets it.

- With it, and valid cluster-autoscaler min/max annotations, the cloud sizes the group:
  the module gets `autoscaling.enabled` and the bounds, `replicas` is the size last
  observed, and the observed size is written back to `MachinePool.spec.replicas`.
- Without it, `spec.replicas` is the desired size, whoever wrote it (a user, or the
  cluster-autoscaler through the MachinePool's `/scale`); the min/max annotations only
  bound it (and let the autoscaler scale the group from zero).

Before issue 37 CAPTF claimed the annotation itself (`captf`) on every pool with the
min/max annotations, which undid the cluster-autoscaler's scaling. Such an old claim is
recognised by its value and by who wrote it (the MachinePool's managedFields, kept by
`claim_writers`), read as absent, and withdrawn (plan/replicas.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.core.contract.sources import dig
from runtime.jsonobj import Json

AUTOSCALER_MIN: Final = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
AUTOSCALER_MAX: Final = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
REPLICAS_MANAGED_BY: Final = "cluster.x-k8s.io/replicas-managed-by"

# The reasons of the AutoscalingActive condition; it never feeds Ready.
AUTOSCALING_ACTIVE: Final = "AutoscalingActive"  # the cloud sizes the group
AUTOSCALING_DISABLED: Final = "AutoscalingDisabled"  # no annotation: spec.replicas
REPLICAS_FROM_SPEC: Final = "ReplicasFromSpec"  # min/max only: spec.replicas, bounded
AUTOSCALING_INVALID: Final = "AutoscalingAnnotationsInvalid"

# The old claim: the only value CAPTF ever wrote, by a merge patch (operation Update)
# that named no fieldManager, so the API server named its manager after the client's
# User-Agent: aiohttp's default, "Python/3.x aiohttp/...", gives "Python".
OLD_CLAIM: Final = "captf"
OLD_CLAIM_MANAGERS: Final = frozenset({"Python"})
# Where `capi_read` keeps, of a MachinePool carrying the old claim's value, the writers
# of the annotation from its managedFields (which the caches drop): a list of
# {"manager", "operation"}. Not an API field: it exists only in what a pass reads.
CLAIM_WRITERS: Final = "captfClaimWriters"
_ANNOTATION_FIELD: Final = f"f:{REPLICAS_MANAGED_BY}"


@dataclass(frozen=True)
class Autoscaling:
    enabled: bool  # the cloud sizes the group: the module's `autoscaling.enabled`
    min: int  # the bounds: valid min/max annotations, else 0
    max: int
    bounded: bool  # valid min/max annotations
    reason: str  # the AutoscalingActive reason
    external: bool = False  # the user's replicas-managed-by
    old_claim: bool = False  # CAPTF's own old claim is on the MachinePool: withdraw it

    def as_input(self) -> Json:
        if not self.enabled:
            return {"enabled": False, "min": 0, "max": 0}
        return {"enabled": True, "min": self.min, "max": self.max}

    def clamp(self, replicas: int) -> int:
        return max(self.min, min(self.max, replicas)) if self.bounded else replicas


def autoscaling_of(pool: Json) -> Autoscaling:
    """Who sizes the group of this MachinePool. Never an error: a pool whose annotations
    are invalid still applies, with spec.replicas as its size."""
    annotations = dig(pool, "metadata", "annotations") or {}
    old = old_claim(pool)
    external = not old and annotations.get(REPLICAS_MANAGED_BY, "false") != "false"
    low, high = annotations.get(AUTOSCALER_MIN), annotations.get(AUTOSCALER_MAX)
    if low is None and high is None:
        # The cloud cannot be told its bounds: the group keeps spec.replicas, and says so.
        reason = AUTOSCALING_INVALID if external else AUTOSCALING_DISABLED
        return Autoscaling(False, 0, 0, False, reason, external, old)
    bounds = _integer(low), _integer(high)
    if bounds[0] is None or bounds[1] is None or not 0 <= bounds[0] <= bounds[1]:
        return Autoscaling(False, 0, 0, False, AUTOSCALING_INVALID, external, old)
    reason = AUTOSCALING_ACTIVE if external else REPLICAS_FROM_SPEC
    return Autoscaling(external, bounds[0], bounds[1], True, reason, external, old)


def old_claim(pool: Json) -> bool:
    """Whether the MachinePool's `replicas-managed-by` is CAPTF's own old claim: the value
    CAPTF wrote, and written only by CAPTF's old writes. Anyone else's hand on the
    field (a user's apply, annotate or edit, a GitOps tool's) makes it theirs to keep;
    so does no record of its writers (a file without managedFields)."""
    annotations = dig(pool, "metadata", "annotations") or {}
    if annotations.get(REPLICAS_MANAGED_BY) != OLD_CLAIM:
        return False
    writers = dig(pool, "metadata", CLAIM_WRITERS)
    if not isinstance(writers, list) or not writers:
        return False
    return all(
        isinstance(w, dict)
        and w.get("operation") == "Update"
        and w.get("manager") in OLD_CLAIM_MANAGERS
        for w in writers
    )


def claim_writers(metadata: Json) -> list[Json] | None:
    """The managers and operations of `metadata.managedFields` that own the
    replicas-managed-by annotation, when its value is the old claim's; None otherwise
    (nothing to keep: the common case costs the caches nothing)."""
    annotations = metadata.get("annotations") or {}
    if annotations.get(REPLICAS_MANAGED_BY) != OLD_CLAIM:
        return None
    found = []
    for entry in metadata.get("managedFields") or []:
        owned = dig(entry, "fieldsV1", "f:metadata", "f:annotations") or {}
        if _ANNOTATION_FIELD in owned:
            found.append({"manager": entry.get("manager"), "operation": entry.get("operation")})
    return sorted(found, key=lambda w: (str(w["manager"]), str(w["operation"])))


def condition_of(pool: Json) -> tuple[str, str, str]:
    """AutoscalingActive's status, reason and message for this MachinePool."""
    scaling = autoscaling_of(pool)
    wanted = dig(pool, "spec", "replicas")
    if scaling.enabled:
        message = (
            f"{REPLICAS_MANAGED_BY} is set: the cloud sizes the group between "
            f"{scaling.min} and {scaling.max}, and its size is written to spec.replicas"
        )
        if (dig(pool, "metadata", "annotations") or {}).get(REPLICAS_MANAGED_BY) == OLD_CLAIM:
            message += (
                f" (CAPTF itself wrote the value {OLD_CLAIM!r} before issue 37 and withdraws"
                " what it can tell is its own; if nobody here set it, remove it)"
            )
        return "True", scaling.reason, message
    if scaling.reason == REPLICAS_FROM_SPEC:
        message = (
            f"spec.replicas is the size, bounded by the autoscaler's annotations to "
            f"[{scaling.min}, {scaling.max}]"
        )
        if isinstance(wanted, int) and scaling.clamp(wanted) != wanted:
            message += f": {wanted} is out of bounds, the group is sized {scaling.clamp(wanted)}"
        return "False", scaling.reason, message
    if scaling.reason == AUTOSCALING_INVALID:
        message = (
            "the autoscaler's min/max annotations are missing or invalid (both integers, "
            "0 <= min <= max): spec.replicas is the size"
        )
        if scaling.external:
            message = f"{REPLICAS_MANAGED_BY} is set, but {message}"
        return "False", scaling.reason, message
    return "False", scaling.reason, "spec.replicas is the size (no autoscaler annotations)"


def _integer(text: object) -> int | None:
    try:
        return int(str(text).strip())
    except ValueError:
        return None
