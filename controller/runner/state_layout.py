"""How a state is laid out in Secrets: any size, never torn (docs/state.md).

The state Secret holds a manifest, `manifest.json`: the state's size and SHA-256, and
its gzip-compressed body, either inline (`state.gz`, when it fits) or as parts, each a
Secret of its own named in order with the SHA-256 of its bytes. Parts are immutable and
named from the digest of the whole compressed body (`<state>-part-<digest16>-<i>`), so a
write never changes a part another manifest names; the state changes when, and only
when, its manifest Secret is replaced, in one write over the resourceVersion read. A
runner killed before that write leaves the old manifest and its parts whole; killed
after it, the new. Parts no manifest names any more are removed after the switch.

A state written before this layout (`terraform.tfstate` in the state Secret) is read
as it is; the next write lays it out anew.

Invariants checked on every read: every part present, each part's digest, the whole
body's digest and size, gzip that decodes, JSON with an integer serial. Any failure is
a `StateError` naming what failed: an unreadable state, never a missing one."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from controller.core.basics.names import (
    STATE_KEY,
    STATE_MANIFEST_KEY,
    STATE_SIZE_LIMIT,
    state_part_name,
)
from runtime.jsonobj import Json

MANIFEST_KEY: Final = STATE_MANIFEST_KEY
INLINE_KEY: Final = "state.gz"
PART_KEY: Final = "part"
FORMAT: Final = 2
# The largest state accepted, uncompressed: twice what a module of a few thousand
# resources writes, and what a runner holds in memory a few times over while it writes.
MAX_STATE_BYTES: Final = STATE_SIZE_LIMIT
# Bytes of compressed body per part: base64 makes it 1 MiB in the Secret's JSON, under
# the API server's request limit (1.5 MiB) and Kubernetes' 1 MiB of Secret data.
PART_BYTES: Final = 768 * 1024
# A compressed body up to this size stays in the manifest Secret (with the outputs and
# the manifest, under 1 MiB): most states are one Secret, as before.
INLINE_BYTES: Final = 512 * 1024
# gzip level: a 40 MiB state compresses in about a second on one core.
GZIP_LEVEL: Final = 6


class LayoutError(ValueError):
    """A stored state that cannot be read whole; the message says what failed."""


@dataclass(frozen=True)
class Part:
    name: str
    data: bytes  # compressed bytes
    sha256: str


@dataclass(frozen=True)
class Laid:
    """A state as it is written: the manifest Secret's data keys (besides outputs) and the
    part Secrets to create first."""

    keys: dict[str, bytes]
    parts: tuple[Part, ...]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def too_large(size: int) -> str | None:
    if size <= MAX_STATE_BYTES:
        return None
    return f"the state is {size} bytes, over the maximum of {MAX_STATE_BYTES} bytes"


def lay_out(state_secret: str, data: bytes) -> Laid:
    """The manifest and parts of `data` (checked against the maximum by the caller)."""
    body = gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    digest = _sha(body)
    manifest: Json = {
        "format": FORMAT,
        "size": len(data),
        "sha256": _sha(data),
        "compressed": {"encoding": "gzip", "size": len(body), "sha256": digest},
        "parts": [],
    }
    if len(body) <= INLINE_BYTES:
        keys = {MANIFEST_KEY: _dump(manifest), INLINE_KEY: body}
        return Laid(keys, ())
    parts = []
    for index, start in enumerate(range(0, len(body), PART_BYTES)):
        chunk = body[start : start + PART_BYTES]
        parts.append(Part(part_name(state_secret, digest, index), chunk, _sha(chunk)))
    manifest["parts"] = [{"name": p.name, "sha256": p.sha256, "size": len(p.data)} for p in parts]
    return Laid({MANIFEST_KEY: _dump(manifest)}, tuple(parts))


part_name = state_part_name


def parts_annotation(laid: Laid) -> str | None:
    """ANN_STATE_PARTS for a state laid out in parts: `<digest16>:<count>`."""
    if not laid.parts:
        return None
    manifest = json.loads(laid.keys[MANIFEST_KEY])
    return f"{manifest['compressed']['sha256'][:16]}:{len(laid.parts)}"


def _dump(document: Json) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def decoded(secret: Json, key: str) -> bytes | None:
    value = (secret.get("data") or {}).get(key)
    return None if value is None else base64.b64decode(value)


def manifest_of(secret: Json) -> Json | None:
    """The manifest a state (or backup) Secret holds; None for the older layout."""
    raw = decoded(secret, MANIFEST_KEY)
    if raw is None:
        return None
    try:
        document = json.loads(raw)
    except ValueError:
        raise LayoutError("its manifest is not JSON") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise LayoutError(f"its manifest is not of format {FORMAT}")
    return document


def part_names(secret: Json) -> list[str]:
    """The parts a stored manifest names (none for an inline or older state, or one that
    cannot be read: it protects nothing)."""
    try:
        manifest = manifest_of(secret)
    except LayoutError:
        return []
    parts = (manifest or {}).get("parts") or []
    return [str(p.get("name")) for p in parts if isinstance(p, dict) and p.get("name")]


Fetch = Callable[[str], Awaitable[Json | None]]


async def read_body(secret: Json, fetch: Fetch) -> bytes:
    """The state a Secret holds, whole and checked; `fetch` reads a part Secret by name."""
    older = decoded(secret, STATE_KEY)
    manifest = manifest_of(secret)
    if manifest is None:
        if older is None:
            raise LayoutError(f"it has neither {MANIFEST_KEY} nor {STATE_KEY}")
        return older
    compressed = manifest.get("compressed") or {}
    if manifest.get("parts"):
        body = b"".join([await _part(entry, fetch) for entry in manifest["parts"]])
    else:
        body = decoded(secret, INLINE_KEY) or b""
    if len(body) != compressed.get("size") or _sha(body) != compressed.get("sha256"):
        raise LayoutError("its compressed body does not match the manifest's digest")
    try:
        data = gzip.decompress(body)
    except (OSError, EOFError) as exc:
        raise LayoutError(f"its body does not decompress: {exc}") from None
    if len(data) != manifest.get("size") or _sha(data) != manifest.get("sha256"):
        raise LayoutError("its state does not match the manifest's digest")
    return data


async def _part(entry: Json, fetch: Fetch) -> bytes:
    name = str(entry.get("name"))
    secret = await fetch(name)
    if secret is None:
        raise LayoutError(f"part {name} is missing")
    data = decoded(secret, PART_KEY)
    if data is None or _sha(data) != entry.get("sha256"):
        raise LayoutError(f"part {name} does not match its digest")
    return data
