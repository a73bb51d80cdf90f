"""Looking a module image's reference up in its registry, for the plan's pinning
(controller/core/decide/pinning.py): the digest the reference names now, the sum of its
layers' sizes and its `io.captf.role` label.

The registry protocol is spoken in this process (controller/io/oci.py, over aiohttp):
the manifest by tag or digest, hashed to the digest it is named by, an index resolved
to this machine's platform, and the config blob by digest, checked against its
descriptor; never a layer. Two or three requests a lookup (and the token), where three
`crane` processes, each with its own handshake, used to be (docs/performance.md).

Credentials are those of the pod that would run the image: the imagePullSecrets of
the runner's ServiceAccount (the API server copies them into the pod), each Secret of
type `kubernetes.io/dockerconfigjson` or `kubernetes.io/dockercfg` merged into one
Docker config, the first naming a registry winning. They stay in this process's memory
for the lookup, are sent only to the registry they are for (never to where it
redirects a blob, never to a token service not named by its challenge) and are never
logged; this process's own Docker login, proxies and `.netrc` are never used.

One lookup per key, shared: the key is the reference, the namespace and a hash of the
credentials used. Concurrent askers of a key await the one lookup in flight (the
members of a MachineDeployment scaling up ask together), and its answer is cached: a
success for SUCCESS_TTL, a failure for FAILURE_TTL, so a retry after a failure's wait
asks again. The ServiceAccount and Secret reads behind the credentials are shared in
flight too. A failure is one of three kinds with a message this module writes (never
the registry's text, which could carry what it echoes back): ImageNotFound (404, no
such manifest or repository, a reference that is none), RegistryUnauthorized (401,
403), RegistryUnavailable (anything else: a 5xx, content that does not hash, no answer
in LOOKUP_TIMEOUT)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

import aiohttp
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
)
from controller.image.fetch import FetchFailed, is_index, platform_entry
from controller.image.layout import platform_of
from controller.io.api import SECRETS, SERVICE_ACCOUNTS, Api, get_or_none, resource_path
from controller.io.oci import Client, RegistryFailed, parse
from runtime.clock import Clock
from runtime.jsonobj import Json

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

SUCCESS_TTL = 60.0
FAILURE_TTL = 15.0
# The reconciler hands a plan's answer to the object's next pass while it is cached
# (controller/io/memory.py); were that pass late, a failure's must still be gone when the
# wait it causes ends, so that the Run after the wait asks again.
assert min(IMAGE_WAITS.values()) > FAILURE_TTL, "a failed lookup must be asked again after its wait"
# Seconds one lookup may take: it blocks the passes that await it, not the others'.
LOOKUP_TIMEOUT = 20.0
DOCKER_CONFIG_JSON = ("kubernetes.io/dockerconfigjson", ".dockerconfigjson")
DOCKER_CFG = ("kubernetes.io/dockercfg", ".dockercfg")


class LookupFailed(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Flights(Generic[K, V]):
    """Work shared by key while it runs: the first asker starts it, later askers await
    the same task. Shielded: one asker cancelled leaves the others their answer."""

    _running: dict[K, asyncio.Task[V]] = field(default_factory=dict)

    async def run(self, key: K, work: Callable[[], Awaitable[V]]) -> V:
        task = self._running.get(key)
        if task is None:
            task = asyncio.ensure_future(self._alone(key, work))
            self._running[key] = task
        return await asyncio.shield(task)

    async def _alone(self, key: K, work: Callable[[], Awaitable[V]]) -> V:
        try:
            return await work()
        finally:
            del self._running[key]

    def __len__(self) -> int:
        return len(self._running)


@dataclass
class ImageRegistry:
    """The controller's lookups, their flights and their short cache (one event loop: no
    lock is needed)."""

    clock: Clock
    _cache: dict[tuple[str, str, str], tuple[ImageFact, float]] = field(default_factory=dict)
    _lookups: Flights[tuple[str, str, str], ImageFact] = field(default_factory=Flights)
    _auths: Flights[tuple[str, str], Json] = field(default_factory=Flights)
    # The scheme each registry host answered on (https, or http for a private one).
    _schemes: dict[str, str] = field(default_factory=dict)

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
        """The answer for the plan's lookup: cached, else the lookup in flight for the
        same key, else asked of the registry."""
        account = lookup.service_account or ""
        auths = await self._auths.run(
            (lookup.namespace, account),
            lambda: pull_auths(client, lookup.namespace, lookup.service_account),
        )
        key = (lookup.reference, lookup.namespace, _fingerprint(auths))
        cached = self._cache.get(key)
        if cached is not None and cached[1] > self.clock.monotonic():
            return cached[0]
        return await self._lookups.run(key, lambda: self._ask_and_keep(key, auths))

    async def _ask_and_keep(self, key: tuple[str, str, str], auths: Json) -> ImageFact:
        fact = await self._ask(key[0], auths)
        now = self.clock.monotonic()
        self._expire(now)
        self._cache[key] = (fact, now + cached_for(fact))
        return fact

    async def _ask(self, reference: str, auths: Json) -> ImageFact:
        try:
            return await self._lookup(reference, auths)
        except LookupFailed as failed:
            log.info("module image %s: %s", reference, failed.kind)
            return Unresolved(reference, failed.kind, str(failed))

    async def _lookup(self, reference: str, auths: Json) -> Resolved:
        try:
            name = parse(reference)
        except ValueError:
            raise _failed(reference, RegistryFailed(IMAGE_NOT_FOUND, "")) from None
        try:
            with anyio.fail_after(LOOKUP_TIMEOUT):
                async with aiohttp.ClientSession(trust_env=False) as session:
                    client = Client(session, name, auths, self._schemes)
                    return await _lookup(client, reference)
        except TimeoutError:
            raise LookupFailed(
                REGISTRY_UNAVAILABLE,
                f"{reference}: the registry gave no answer in {LOOKUP_TIMEOUT:g}s",
            ) from None
        except RegistryFailed as failed:
            raise _failed(reference, failed) from None
        except (aiohttp.ClientError, OSError):
            unreached = RegistryFailed(REGISTRY_UNAVAILABLE, "could not be reached")
            raise _failed(reference, unreached) from None

    def _expire(self, now: float) -> None:
        for key in [k for k, (_, until) in self._cache.items() if until <= now]:
            del self._cache[key]


def cached_for(fact: ImageFact) -> float:
    """Seconds an answer is cached: a success's, a failure's (see the module)."""
    return SUCCESS_TTL if isinstance(fact, Resolved) else FAILURE_TTL


async def _lookup(client: Client, reference: str) -> Resolved:
    """The digest (the reference's own, else its tag's), the image manifest behind it
    and its config."""
    digest = reference_digest(reference)
    raw, named = await client.manifest(digest or client.name.tag)
    digest = digest or named
    manifest = _json(raw, reference)
    if is_index(manifest):
        raw, _ = await client.manifest(_platform_manifest(manifest, reference))
        manifest = _json(raw, reference)
    config = manifest.get("config")
    if not isinstance(config, dict) or "digest" not in config:
        raise LookupFailed(IMAGE_NOT_FOUND, f"{reference}: the manifest names no config")
    labels = (_json(await client.blob(config), reference).get("config") or {}).get("Labels")
    size = sum(int(layer.get("size") or 0) for layer in manifest.get("layers") or [])
    labels = labels or {}
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


def _json(raw: bytes, reference: str) -> Json:
    try:
        found = json.loads(raw)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise LookupFailed(REGISTRY_UNAVAILABLE, f"{reference}: the registry sent no JSON object")
    return found


def _failed(reference: str, failed: RegistryFailed) -> LookupFailed:
    """A lookup's failure in our own words: the registry as the reference names it, the
    reference, and for an unavailable registry what went wrong (see the module)."""
    registry = reference.split("/", 1)[0]
    if failed.kind == REGISTRY_UNAUTHORIZED:
        return LookupFailed(
            REGISTRY_UNAUTHORIZED,
            f"registry {registry} refused {reference} without valid credentials "
            "(the runner ServiceAccount's imagePullSecrets)",
        )
    if failed.kind == IMAGE_NOT_FOUND:
        return LookupFailed(IMAGE_NOT_FOUND, f"registry {registry} has no image {reference}")
    return LookupFailed(REGISTRY_UNAVAILABLE, f"registry {registry} {failed} for {reference}")


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
