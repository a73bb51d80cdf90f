"""Looking a module image's reference up in its registry, for the plan's pinning
(controller/core/decide/pinning.py): the digest the reference names now, the sum of its
layers' sizes and its `io.captf.role` label.

The registry protocol is go-containerregistry's `crane`, run by the reader the process
node and `captf lint image` use too (controller/image/fetch.py): `crane digest`
resolves a tag, `crane manifest` and `crane blob` fetch the manifest and the config by
digest, and each is hashed and compared with the digest it was asked for. Only the
manifest and the config are fetched, never a layer. The binary is `$CAPTF_CRANE`, else
`crane` on the PATH (the controller's image carries it), else this checkout's build
(hack/registry).

Credentials are those of the pod that would run the image: the imagePullSecrets of
the runner's ServiceAccount (the API server copies them into the pod), each Secret of
type `kubernetes.io/dockerconfigjson` or `kubernetes.io/dockercfg` merged into one
Docker config, the first naming a registry winning, written for the call into a
private temporary directory and removed after it. crane never sees this process's own
Docker login (`DOCKER_CONFIG` and `HOME` always point at that directory).

Answers are cached briefly: a success for SUCCESS_TTL, a failure for FAILURE_TTL, by
reference, namespace and a hash of the credentials used, so the members of one pool
starting together ask once, and a retry after a failure's wait asks again. A failure
is one of three kinds with a message this module writes (never crane's output, which
could carry what a registry echoes back): ImageNotFound (404, no such manifest or
repository, a reference crane refuses), RegistryUnauthorized (401, 403),
RegistryUnavailable (anything else: a 5xx, no answer in LOOKUP_TIMEOUT, no crane)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from controller.core import (
    IMAGE_NOT_FOUND,
    IMAGE_WAITS,
    LABEL_CAPACITY,
    LABEL_NODE_INFO,
    REGISTRY_UNAUTHORIZED,
    REGISTRY_UNAVAILABLE,
    ROLE_LABEL,
    ImageFact,
    ImageLookup,
    Resolved,
    Unresolved,
    reference_digest,
    repository_of,
)
from controller.image.fetch import Crane, FetchFailed, FetchKind, is_index, platform_entry
from controller.image.layout import platform_of
from controller.io.api import SECRETS, SERVICE_ACCOUNTS, Api, get_or_none, resource_path
from runtime.clock import Clock

log = logging.getLogger(__name__)
Json = dict[str, Any]

SUCCESS_TTL = 60.0
FAILURE_TTL = 15.0
# The reconciler hands a plan's answer to the object's next pass while it is cached
# (controller/io/memory.py); were that pass late, a failure's must still be gone when the
# wait it causes ends, so that the Run after the wait asks again.
assert min(IMAGE_WAITS.values()) > FAILURE_TTL, "a failed lookup must be asked again after its wait"
# Seconds one crane call may take: the lookup blocks the object's pass, not the others'.
LOOKUP_TIMEOUT = 20.0
DOCKER_CONFIG_JSON = ("kubernetes.io/dockerconfigjson", ".dockerconfigjson")
DOCKER_CFG = ("kubernetes.io/dockercfg", ".dockercfg")
# What crane gets of this process beside the private Docker config: its trust roots.
_PASSED = ("PATH", "SSL_CERT_FILE", "SSL_CERT_DIR")
_NOT_FOUND = re.compile(r"MANIFEST_UNKNOWN|NAME_UNKNOWN|BLOB_UNKNOWN|\b404\b|not found", re.I)
_UNAUTHORIZED = re.compile(r"UNAUTHORIZED|DENIED|\b401\b|\b403\b", re.I)
_BAD_REFERENCE = re.compile(r"could not parse reference|invalid reference", re.I)
_STATUS = re.compile(r"\b(5\d\d)\b")


def crane_binary() -> Path | None:
    """The crane the controller looks up with (see the module), or None."""
    given = os.environ.get("CAPTF_CRANE")
    if given:
        return Path(given)
    found = shutil.which("crane")
    if found:
        return Path(found)
    # Imported here: the development build's helpers pull in what a deployed controller,
    # which has crane on its PATH, never needs (the test-cluster code and its TLS).
    from runtime.envtest.registry import RegistryMissing, registry_dir

    try:
        return registry_dir(build=False) / "crane"
    except RegistryMissing:
        return None


class LookupFailed(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ImageRegistry:
    """The controller's lookups and their short cache (one event loop: no lock is needed
    for the cache; concurrent lookups of one key may both ask, which is harmless)."""

    clock: Clock
    # None: found on the first lookup (`crane_binary`, off the event loop: it may run
    # the development build's check script), so a controller that never meets a module
    # image never looks.
    crane: Path | None = None
    _cache: dict[tuple[str, str, str], tuple[ImageFact, float]] = field(default_factory=dict)

    def peek(self, reference: str, namespace: str) -> ImageFact | None:
        """A fresh cached answer for `reference` in `namespace`, whatever credentials it
        was asked with, marked as not asked for this pass: it may note a moved tag, never
        change what runs."""
        now = self.clock.monotonic()
        for (ref, ns, _), (fact, until) in self._cache.items():
            if ref == reference and ns == namespace and until > now:
                return replace(fact, asked=False)
        return None

    async def resolve(self, client: Api, lookup: ImageLookup) -> ImageFact:
        """The answer for the plan's lookup: cached, else asked of the registry."""
        auths = await pull_auths(client, lookup.namespace, lookup.service_account)
        key = (lookup.reference, lookup.namespace, _fingerprint(auths))
        now = self.clock.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        fact = await self._ask(lookup.reference, auths)
        self._expire(now)
        self._cache[key] = (fact, now + cached_for(fact))
        return fact

    async def _ask(self, reference: str, auths: Json) -> ImageFact:
        if self.crane is None:
            self.crane = await anyio.to_thread.run_sync(crane_binary)
        try:
            with tempfile.TemporaryDirectory(prefix="captf-lookup-") as private:
                if auths:
                    _write_private(Path(private) / "config.json", json.dumps({"auths": auths}))
                if self.crane is None or not self.crane.exists():
                    raise LookupFailed(
                        REGISTRY_UNAVAILABLE, "the controller has no crane to look images up with"
                    )
                crane = Crane(self.crane, Path(private), timeout=LOOKUP_TIMEOUT, passed=_PASSED)
                return await _lookup(crane, reference, Path(private) / "image-config")
        except LookupFailed as failed:
            log.info("module image %s: %s", reference, failed.kind)
            return Unresolved(reference, failed.kind, str(failed))

    def _expire(self, now: float) -> None:
        for key in [k for k, (_, until) in self._cache.items() if until <= now]:
            del self._cache[key]


def cached_for(fact: ImageFact) -> float:
    """Seconds an answer is cached: a success's, a failure's (see the module)."""
    return SUCCESS_TTL if isinstance(fact, Resolved) else FAILURE_TTL


async def _lookup(crane: Crane, reference: str, config_file: Path) -> Resolved:
    repository = repository_of(reference)
    try:
        digest = reference_digest(reference) or await crane.digest(reference)
        if not digest.startswith("sha256:"):
            raise LookupFailed(REGISTRY_UNAVAILABLE, f"{reference}: the registry named no digest")
        manifest = await crane.verified_manifest(repository, digest)
        if is_index(manifest):
            chosen = _platform_manifest(manifest, reference)
            manifest = await crane.verified_manifest(repository, chosen)
        config = manifest.get("config")
        if not isinstance(config, dict) or "digest" not in config:
            raise LookupFailed(IMAGE_NOT_FOUND, f"{reference}: the manifest names no config")
        raw = (await crane.verified_blob(repository, config, config_file)).read_bytes()
    except FetchFailed as failed:
        raise _fetched_failure(reference, failed) from None
    labels = (json.loads(raw).get("config") or {}).get("Labels") or {}
    size = sum(int(layer.get("size") or 0) for layer in manifest.get("layers") or [])
    role = labels.get(ROLE_LABEL)
    capacity, node_info = labels.get(LABEL_CAPACITY), labels.get(LABEL_NODE_INFO)
    return Resolved(
        reference,
        digest,
        size,
        str(role) if role is not None else None,
        capacity=str(capacity) if capacity is not None else None,
        node_info=str(node_info) if node_info is not None else None,
    )


def _fetched_failure(reference: str, failed: FetchFailed) -> LookupFailed:
    """A crane failure as a lookup's: content that does not hash to its digest is the
    registry's fault; a timeout says so; anything else is read from crane's own line."""
    if failed.kind is FetchKind.REFUSED:
        return LookupFailed(REGISTRY_UNAVAILABLE, f"{reference}: {failed}")
    if failed.verbose == str(failed) and failed.kind is FetchKind.UNREACHABLE:
        return LookupFailed(
            REGISTRY_UNAVAILABLE,
            f"{reference}: the registry gave no answer in {LOOKUP_TIMEOUT:g}s",
        )
    return _failure(reference, failed.verbose)


def _failure(reference: str, said: str) -> LookupFailed:
    """The kind of a failed crane call and a message of our own (see the module)."""
    registry = reference.split("/", 1)[0]
    if _UNAUTHORIZED.search(said):
        return LookupFailed(
            REGISTRY_UNAUTHORIZED,
            f"registry {registry} refused {reference} without valid credentials "
            "(the runner ServiceAccount's imagePullSecrets)",
        )
    if _NOT_FOUND.search(said) or _BAD_REFERENCE.search(said):
        return LookupFailed(IMAGE_NOT_FOUND, f"registry {registry} has no image {reference}")
    status = _STATUS.search(said)
    why = f"answered HTTP {status.group(1)}" if status else "could not be reached"
    return LookupFailed(REGISTRY_UNAVAILABLE, f"registry {registry} {why} for {reference}")


def _platform_manifest(index: Json, reference: str) -> str:
    """This machine's entry of an index: a missing platform is no image for it."""
    wanted = platform_of()
    try:
        return str(platform_entry(index, wanted, image=reference)["digest"])
    except FetchFailed:
        raise LookupFailed(
            IMAGE_NOT_FOUND, f"{reference}: no {wanted} image in the index"
        ) from None


async def pull_auths(client: Api, namespace: str, service_account: str | None) -> Json:
    """The registry -> credentials map of the ServiceAccount's imagePullSecrets (merged,
    the first naming a registry winning); a Secret missing or of another type is passed
    over, as a kubelet does."""
    if not service_account:
        return {}
    account = await get_or_none(client, resource_path(SERVICE_ACCOUNTS, namespace, service_account))
    merged: Json = {}
    for ref in (account or {}).get("imagePullSecrets") or []:
        name = str((ref or {}).get("name") or "")
        secret = (
            await get_or_none(client, resource_path(SECRETS, namespace, name)) if name else None
        )
        try:
            found = auths_of(secret or {})
        except ValueError:
            continue
        for registry, entry in found.items():
            merged.setdefault(registry, entry)
    return merged


def auths_of(secret: Json) -> Json:
    """The registry -> credentials map of one pull Secret; ValueError when it holds none
    (the message names the Secret's type and keys, never a value)."""
    kind = str(secret.get("type") or "")
    data = secret.get("data") or {}
    for secret_type, key in (DOCKER_CONFIG_JSON, DOCKER_CFG):
        if kind != secret_type:
            continue
        if key not in data:
            raise ValueError(f"type {kind} without the key {key}")
        try:
            decoded = json.loads(base64.b64decode(data[key]))
        except (binascii.Error, ValueError):
            raise ValueError(f"{key} is not base64 JSON") from None
        auths = decoded.get("auths") if secret_type == DOCKER_CONFIG_JSON[0] else decoded
        if not isinstance(auths, dict):
            raise ValueError(f"{key} has no auths")
        return dict(auths)
    raise ValueError(f"type {kind or 'Opaque'} is not {DOCKER_CONFIG_JSON[0]}")


def _fingerprint(auths: Json) -> str:
    """A cache key part for the credentials: their hash, never the credentials."""
    return hashlib.sha256(json.dumps(auths, sort_keys=True).encode()).hexdigest()


def _write_private(path: Path, text: str) -> None:
    path.parent.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
