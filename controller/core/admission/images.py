"""The syntax of an image reference, as the container runtimes parse one.

`[host[:port]/]path[:tag][@digest]` (the OCI distribution grammar): host components
of letters, digits and hyphens joined by dots; path components of lower-case letters
and digits joined by `.`, `_`, `__` or hyphens; a tag of at most 128 word characters,
dots and hyphens; a digest `algorithm:hex`. A reference that breaks it would only fail
later, as a pod that cannot pull, after the Job and its Lease exist."""

from __future__ import annotations

import re

from controller.core.admission.refusal import Refusal
from runtime.jsonobj import Json

# The whole name (host and path) is at most 255 characters.
NAME_LIMIT = 255
_HOST_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"{_HOST_PART}(?:\.{_HOST_PART})*(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_HOST}/)?{_PATH_PART}(?:/{_PATH_PART})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@(?P<digest>{_DIGEST}))?")
# The lengths the algorithms registered with OCI have.
_DIGEST_HEX = {"sha256": 64, "sha512": 128}


def reference_problem(reference: str) -> str | None:
    """Why `reference` is no image reference, in words that do not repeat it; None if it is."""
    match = _REFERENCE.fullmatch(reference)
    if match is None:
        return "is not an image reference ([host[:port]/]path[:tag][@algorithm:hex])"
    if len(match["name"]) > NAME_LIMIT:
        return f"names a repository longer than {NAME_LIMIT} characters"
    digest = match["digest"]
    if digest:
        algorithm, _, hexits = digest.partition(":")
        wanted = _DIGEST_HEX.get(algorithm)
        if wanted is not None and len(hexits) != wanted:
            return f"has a {algorithm} digest that is not {wanted} hex digits"
        if hexits != hexits.lower():
            return "has a digest with upper-case hex digits"
    return None


def refusals(spec: Json, prefix: str = "spec") -> list[Refusal]:
    """spec.source.image, when given, must be an image reference."""
    source = spec.get("source")
    image = source.get("image") if isinstance(source, dict) else None
    if image is None:
        return []
    if not isinstance(image, str):
        return [Refusal(f"{prefix}.source.image", "must be a string")]
    problem = reference_problem(image)
    return [] if problem is None else [Refusal(f"{prefix}.source.image", problem)]
