"""Digest pinning of module images: which digest a Job of an image source runs, when io
must look the reference up first, and what the status says about it.

Kubernetes v1.35 does not report an image volume's digest in the pod status, so the
controller resolves the reference itself (io's lookup, controller/io/registry.py) and
every Job names `repository@digest`: what ran is known by construction. The digest is
part of the durable inputs (the inputs Secret's `image.digest`, covered by the hash),
so the inputs the state was applied with pin it.

When the reference is resolved (a Job of these ops and kinds asks for a lookup first;
the guard `image`, `holds.lookup_needed`):
- a digest reference (`repo@sha256:...`) is its own digest: looked up only for the
  checks, before an apply or plan; never for a drift check (nothing can move);
- an immutable TerraformMachine: before every Job until its first apply succeeds;
  after it, never: drift, refresh and destroy run the digest it was applied with (the
  applied inputs, controller/core/decide/contract_inputs.py);
- a mutable TerraformCluster or TerraformMachinePool: before each apply, plan and drift
  check, so at most once per drift interval besides the applies. A new digest behind the
  same tag is new inputs: `ImageTagMoved` re-applies (`tag_moved`). Refresh and destroy
  run the known digest.
Between lookups the known digest is the newest inputs Secret's for the same reference
(`known_digest`); a lookup that answers is used at once, and one that fails waits,
without a Job, as the ImageResolved condition says."""

from __future__ import annotations

from dataclasses import replace

from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    ANN_MODULE_IMAGE,
    ANN_MODULE_IMAGE_DIGEST,
    ANN_MODULE_IMAGE_MOUNT,
    MUTABLE_KINDS,
    Reason,
)
from controller.core.decide.contract_inputs import role_of
from controller.core.decide.decision import Requeue
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.history import History
from controller.core.jobs.job import annotations_of, created_at
from controller.core.spec import inputs_secret
from controller.core.spec.image import (
    IMAGE_NOT_FOUND,
    IMAGE_ROLE_MISMATCH,
    IMAGE_TOO_LARGE,
    REGISTRY_UNAUTHORIZED,
    REGISTRY_UNAVAILABLE,
    ROLE_LABEL,
    ImageFact,
    Resolved,
    Unresolved,
    reference_digest,
    short,
)
from controller.core.spec.inputs import Inputs
from controller.core.spec.inputs_secret import InputsSecretError
from controller.core.spec.refs import ModuleImage
from runtime.jsonobj import Json

CONDITION = "ImageResolved"
# The ops of a mutable kind that resolve the reference again first.
# Seconds an object waits after a lookup failed or found an image the checks refuse: a
# missing image or credentials may be pushed or granted at any time, and no watch says
# so; a registry that failed is asked again sooner; an image refused by its size or role
# needs a new image (a spec change wakes the object at once).
IMAGE_WAITS: dict[str, float] = {
    IMAGE_NOT_FOUND: 120.0,
    REGISTRY_UNAUTHORIZED: 120.0,
    REGISTRY_UNAVAILABLE: 60.0,
    IMAGE_TOO_LARGE: 600.0,
    IMAGE_ROLE_MISMATCH: 600.0,
}
# The wait of a pass that needs a lookup nobody made (`captf decide` has no registry).
RESOLVING_WAIT = 5.0


def secret_image(secret: Json) -> ModuleImage | None:
    """The reference and digest an inputs Secret names (the pull policy is not kept); None
    for a module of files, or a malformed Secret (spec/inputs_secret.py)."""
    try:
        carried = inputs_secret.decode(secret.get("data"))
    except InputsSecretError:
        return None
    if carried.image is None:
        return None
    return ModuleImage(carried.image, digest=carried.digest)


def applied_image(snap: Snapshot) -> ModuleImage | None:
    """The image of the inputs the state was applied with: the pin."""
    state = snap.state_secret
    applied = annotations_of(state).get(ANN_INPUTS_HASH) if state else None
    for secret in snap.inputs_secrets() if applied else ():
        if annotations_of(secret).get(ANN_INPUTS_HASH) == applied:
            return secret_image(secret)
    return None


def known_digest(snap: Snapshot, reference: str) -> str:
    """The digest a Job of `reference` runs without a lookup: the reference's own; for an
    immutable machine the applied one; else the newest inputs Secret's of the same
    reference (what the last Job ran); "" when none is known."""
    own = reference_digest(reference)
    if own:
        return own
    applied = applied_image(snap)
    if snap.kind not in MUTABLE_KINDS and applied is not None and applied.reference == reference:
        return applied.digest
    # Newest first; among Secrets of one second (a move recreates them all at once) the
    # applied one's.
    found = [
        (str(created_at(secret) or ""), image == applied, image.digest)
        for secret in snap.inputs_secrets()
        if (image := secret_image(secret)) is not None
        and image.reference == reference
        and image.digest
    ]
    return max(found)[2] if found else ""


def refusal(fact: Resolved, kind: str, limit: int) -> Requeue | None:
    """The wait of a resolved image the checks refuse: larger than the limit, or a role
    label that is not the kind's role. An image without the label passes (labels are
    the image contract's metadata; the runner checks the layout)."""
    if fact.size > limit:
        message = (
            f"module image {fact.reference} ({short(fact.digest)}) has {fact.size} bytes of "
            f"layers; the controller's limit (--max-module-image-size) is {limit}"
        )
        return Requeue(IMAGE_TOO_LARGE, IMAGE_WAITS[IMAGE_TOO_LARGE], message=message)
    role = role_of(kind)
    if role is not None and fact.role is not None and fact.role != role.value:
        message = (
            f"module image {fact.reference} ({short(fact.digest)}) is labelled "
            f"{ROLE_LABEL}={fact.role}; a {kind} runs a {role.value} module"
        )
        return Requeue(IMAGE_ROLE_MISMATCH, IMAGE_WAITS[IMAGE_ROLE_MISMATCH], message=message)
    return None


def choose(snap: Snapshot, inputs: Inputs, fact: ImageFact | None, limit: int) -> Inputs | Requeue:
    """The inputs with the digest their Job runs, or the wait of a lookup made for this
    pass that failed or found an image the checks refuse. Only a lookup made because the
    plan asked changes the digest; one io only had in its cache does not."""
    image = inputs.image
    if image is None:
        return inputs
    asked = fact if fact is not None and fact.asked and fact.reference == image.reference else None
    match asked:
        case Unresolved(kind=kind, message=message):
            return Requeue(
                kind, IMAGE_WAITS.get(kind, IMAGE_WAITS[REGISTRY_UNAVAILABLE]), message=message
            )
        case Resolved():
            refused = refusal(asked, snap.kind, limit)
            if refused is not None:
                return refused
            digest = asked.digest
        case _:
            digest = known_digest(snap, image.reference)
    if not digest and snap.deleting and (applied := applied_image(snap)) is not None:
        # A deletion whose spec names a reference never resolved destroys what was
        # applied: a destroy never waits for a registry to know a new tag.
        return replace(inputs, image=replace(applied, pull_policy=image.pull_policy))
    return replace(inputs, image=replace(image, digest=digest))


def resolving(op: str, trigger: str, reference: str) -> Requeue:
    """The pass's decision while its lookup is outstanding: io looks the reference up as a
    step of this pass's plan and requeues the object at once; the next pass decides with
    the answer (the wait is for a controller without a registry, `captf decide`)."""
    message = f"{op} ({trigger}) waits for {reference} to be resolved"
    return Requeue(Reason.IMAGE_RESOLVING, RESOLVING_WAIT, op=op, message=message)


def tag_moved(snap: Snapshot, inputs: Inputs, state_inputs_hash: str | None) -> str | None:
    """Why a mutable kind re-applies when its inputs differ from the state's
    (`state_inputs_hash`) only by the digest behind the same reference, or None."""
    image, applied = inputs.image, applied_image(snap)
    if image is None or applied is None or applied.reference != image.reference:
        return None
    if not (image.digest and applied.digest) or image.digest == applied.digest:
        return None
    before = replace(inputs, image=replace(image, digest=applied.digest))
    if before.hash != state_inputs_hash:
        return None
    return f"{image.reference} now names {short(image.digest)}; {short(applied.digest)} was applied"


def condition(
    snap: Snapshot,
    inputs: Inputs | None,
    fact: ImageFact | None,
    wait: Requeue | None,
    *,
    resolving: bool = False,
) -> Json | None:
    """ImageResolved, without its transition time: False with the reason of a failed or
    refused lookup; True once a digest is known, noting a tag that now names another
    digest than the one an immutable machine keeps. Between lookups the condition shown
    stays (a cached answer for another object may add the note); so does it, whatever it
    says, while this pass's lookup is outstanding (`resolving`): the next pass has the
    answer, and the condition only changes when the answer does."""
    image = inputs.image if inputs is not None else None
    if image is None:
        return None
    if wait is not None and wait.reason in IMAGE_WAITS:
        return _cond(False, wait.reason, wait.message)
    old = next((c for c in snap.status.get("conditions") or [] if c.get("type") == CONDITION), None)
    if resolving and old is not None:
        return _kept(old)
    same = fact is not None and fact.reference == image.reference
    if same and isinstance(fact, Resolved) and fact.digest != image.digest and image.digest:
        keeps = (
            "the next drift check or apply resolves it again"
            if snap.kind in MUTABLE_KINDS
            else "an immutable machine never resolves its tag again"
        )
        message = (
            f"{image.reference} now names {short(fact.digest)}; this {snap.kind} runs "
            f"{short(image.digest)}: {keeps}"
        )
        return _cond(True, "TagMoved", message)
    if same and fact is not None and fact.asked and isinstance(fact, Resolved):
        return _cond(True, "Resolved", f"{image.reference} resolved to {fact.digest}")
    if old is not None and (old.get("status") == "True" or not image.digest):
        return _kept(old)
    if image.digest:
        return _cond(True, "Resolved", f"{image.reference} runs {image.digest}")
    return None


def status_image(history: History) -> Json | None:
    """status.image: the reference and digest of the newest finished Job of a module
    image, and how its pod had the image (its annotations; a Job from before the mount
    was recorded says nothing of it); None when no Job kept says (the status keeps what
    it showed)."""
    for record in history:
        notes = annotations_of(record.job)
        reference, digest = notes.get(ANN_MODULE_IMAGE), notes.get(ANN_MODULE_IMAGE_DIGEST)
        if reference and digest:
            shown = {"reference": reference, "digest": digest}
            mount = notes.get(ANN_MODULE_IMAGE_MOUNT)
            return shown | {"mount": mount} if mount else shown
    return None


def _kept(old: Json) -> Json:
    return {k: old[k] for k in ("type", "status", "reason", "message") if k in old}


def _cond(true: bool, reason: str, message: str) -> Json:
    return {
        "type": CONDITION,
        "status": "True" if true else "False",
        "reason": reason,
        "message": message,
    }
