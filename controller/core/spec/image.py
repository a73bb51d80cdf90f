"""A module image reference as the controller reads it, and what a registry lookup of one
found: the facts io hands the core (controller/io/registry.py looks them up).

Pure: the core never asks a registry. A lookup answers `Resolved` (the digest the
reference names now, the sum of its layers' sizes and its `io.captf.role` label, as the
manifest and config say) or `Unresolved` (why not, as one of the kinds below, with a
message that names the reference and the registry's answer, never a credential)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from controller.core.basics.names import Reason

# The reasons of an image that cannot be used (the ImageResolved condition's, and the
# wait's). The first three are io's answers; the last two the core's checks of a
# resolved image.
IMAGE_NOT_FOUND: Final = Reason.IMAGE_NOT_FOUND
REGISTRY_UNAUTHORIZED: Final = Reason.REGISTRY_UNAUTHORIZED
REGISTRY_UNAVAILABLE: Final = Reason.REGISTRY_UNAVAILABLE
IMAGE_TOO_LARGE: Final = Reason.IMAGE_TOO_LARGE
IMAGE_ROLE_MISMATCH: Final = Reason.IMAGE_ROLE_MISMATCH
LOOKUP_FAILURES: Final = frozenset({IMAGE_NOT_FOUND, REGISTRY_UNAUTHORIZED, REGISTRY_UNAVAILABLE})

# The label of the image contract that names the role module the image carries.
ROLE_LABEL: Final = "io.captf.role"
# The default of --max-module-image-size: compressed layers, as the manifest counts them.
DEFAULT_SIZE_LIMIT: Final = 1 << 30

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Resolved:
    reference: str  # as the spec names it
    digest: str  # sha256:<hex> of the manifest (or index) the reference names
    size: int  # the sum of the layers' sizes in the manifest
    role: str | None  # the io.captf.role label of the image's config; None: no label
    # True when io looked it up for this pass because the plan asked; False when it was
    # only found in io's short cache (a lookup for another object): then it may note a
    # moved tag, but never changes what runs.
    asked: bool = True
    # The scale-from-zero labels, as written (controller/core/contract/capacity.py);
    # None: the image has no such label. Read only by the templates' pass.
    capacity: str | None = None
    node_info: str | None = None


@dataclass(frozen=True)
class Unresolved:
    reference: str
    kind: str  # one of LOOKUP_FAILURES
    message: str
    asked: bool = True


ImageFact = Resolved | Unresolved


def reference_digest(reference: str) -> str:
    """The digest a reference names itself (`repo@sha256:...`), or ""."""
    _, _, digest = reference.partition("@")
    return digest if _DIGEST.fullmatch(digest) else ""


def repository_of(reference: str) -> str:
    """`registry/repository` of a reference: without its tag and digest."""
    rest = reference.partition("@")[0]
    head, slash, last = rest.rpartition("/")
    name = last.partition(":")[0]
    return f"{head}{slash}{name}"


def pinned(reference: str, digest: str) -> str:
    """The reference that names exactly `digest`: `registry/repository@sha256:...`."""
    return f"{repository_of(reference)}@{digest}" if digest else reference


def short(digest: str) -> str:
    """`sha256:` and the first 12 hex digits, as people read a digest."""
    return digest[: len("sha256:") + 12]


@dataclass(frozen=True)
class ImageLookup:
    """What a plan asks io to look up before it can start its Job: the reference, with
    the pull credentials of the pod that would run it (the imagePullSecrets of its
    ServiceAccount in its namespace)."""

    reference: str
    namespace: str
    service_account: str | None
