"""Image references the node pulls, and which pull policy applies to one.

A reference is pulled only when its first component names a registry host (it
holds a `.` or a `:`, or is `localhost`), as in `127.0.0.1:5000/team/mod:v1` or
`registry.example/mod@sha256:...`: the node has no default registry, so a bare
`ubuntu` is never looked up anywhere.

The default policy is the API's: `Always` for a `:latest` tag or a reference with
neither tag nor digest, else `IfNotPresent`. Failed pulls are retried after the
kubelet's image back-off: 10 s, doubling, at most 300 s."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

ALWAYS = "Always"
IF_NOT_PRESENT = "IfNotPresent"
NEVER = "Never"
POLICIES = (ALWAYS, IF_NOT_PRESENT, NEVER)

BACKOFF_START_SECONDS = 10.0
BACKOFF_CAP_SECONDS = 300.0

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[\w][\w.-]{0,127}")


class BadReference(ValueError):
    """Not a reference this node can pull."""


@dataclass(frozen=True)
class Reference:
    """`registry/repository[:tag][@digest]`, split."""

    registry: str
    repository: str
    tag: str = ""
    digest: str = ""

    @property
    def name(self) -> str:
        """`registry/repository`, what blobs and manifests are addressed under."""
        return f"{self.registry}/{self.repository}"

    def at(self, digest: str) -> str:
        """The reference pinned to `digest`."""
        return f"{self.name}@{digest}"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.name}{tag}{digest}"


def parse_reference(image: str) -> Reference:
    """Split `image`; raises BadReference when it names no registry or is malformed."""
    rest, _, digest = image.partition("@")
    if digest and not _DIGEST.fullmatch(digest):
        raise BadReference(f"image {image!r}: digest must be sha256:<64 hex digits>")
    registry, slash, path = rest.partition("/")
    if not slash or not names_registry(registry):
        raise BadReference(f"image {image!r} names no registry host (such as 127.0.0.1:5000/...)")
    repository, tag = path, ""
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        repository, tag = path.rsplit(":", 1)
        if not _TAG.fullmatch(tag):
            raise BadReference(f"image {image!r}: bad tag {tag!r}")
    if not all(_COMPONENT.fullmatch(part) for part in repository.split("/")):
        raise BadReference(f"image {image!r}: bad repository {repository!r}")
    return Reference(registry, repository, tag, digest)


def names_registry(component: str) -> bool:
    """Whether the first component of a reference is a registry host, by Docker's rule."""
    return "." in component or ":" in component or component == "localhost"


def default_policy(image: str) -> str:
    """The API's default `imagePullPolicy` for `image`."""
    rest, _, digest = image.partition("@")
    last = rest.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    if tag == "latest" or (not tag and not digest):
        return ALWAYS
    return IF_NOT_PRESENT


def policy_of(image: str, given: object) -> str:
    """The policy in force: `given` when set, else the default; unknown values refused."""
    if not given:
        return default_policy(image)
    if given not in POLICIES:
        raise BadReference(f"pull policy {given!r} is not one of {', '.join(POLICIES)}")
    return str(given)


def needs_pull(policy: str, present: bool) -> bool:
    """Whether to ask the registry: Always does, IfNotPresent only for an image not in the
    cache, Never never (a missing image is then an error, not a pull)."""
    if policy == ALWAYS:
        return True
    if policy == IF_NOT_PRESENT:
        return not present
    return False


def backoff_delays() -> Iterator[float]:
    """The waits after each failed pull: 10, 20, 40, ... seconds, then 300 for ever."""
    delay = BACKOFF_START_SECONDS
    while True:
        yield delay
        delay = min(delay * 2, BACKOFF_CAP_SECONDS)
