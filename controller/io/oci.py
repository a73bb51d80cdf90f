"""The OCI distribution API, as much of it as a module image lookup needs, spoken in
this process over aiohttp: a manifest by tag or digest (with the Accept headers of the
image and index media types), a blob by digest, and the registry's authentication
(HTTP basic, or a bearer token from the realm its 401 names, for `repository:NAME:pull`).

Nothing the registry returns is trusted: a manifest asked by digest must hash to it; one
asked by tag is named by the hash of its bytes (a Docker-Content-Digest that differs is
refused); a blob must have its descriptor's size and digest. Bodies are read up to a
limit, never further.

A failure is `RegistryFailed`: one of the core's lookup kinds and a phrase of our own
("answered HTTP 500", "could not be reached") that names neither a URL nor anything the
registry said, since a registry may echo a request, credentials included, back.

The scheme is https; a registry on loopback, `localhost` or a private (RFC 1918) address
that does not speak TLS is asked over plain http, as go-containerregistry does."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import aiohttp

from controller.core import IMAGE_NOT_FOUND, REGISTRY_UNAUTHORIZED, REGISTRY_UNAVAILABLE
from runtime.jsonobj import Json

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
# distribution refuses manifests over 4 MiB; a config is a few KiB.
MANIFEST_LIMIT = 4 << 20
BLOB_LIMIT = 16 << 20
_REDIRECTS = 5
DOCKER_HUB = "index.docker.io"
_HUB_API = "registry-1.docker.io"
_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io", _HUB_API)
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class RegistryFailed(Exception):
    """`kind`: one of the core's lookup kinds; `str()`: our phrase alone."""

    def __init__(self, kind: str, phrase: str) -> None:
        super().__init__(phrase)
        self.kind = kind


@dataclass(frozen=True)
class Name:
    """A reference's parts, as go-containerregistry parses them: no registry (no `.` or
    `:` in the first component, not `localhost`) is Docker Hub, `library/` for one
    component; no tag and no digest is `latest`."""

    registry: str
    repository: str
    tag: str
    digest: str

    @property
    def api_host(self) -> str:
        return _HUB_API if self.registry == DOCKER_HUB else self.registry


def parse(reference: str) -> Name:
    """The reference's parts; ValueError (saying nothing of the text) when it is none."""
    rest, _, digest = reference.partition("@")
    head, slash, tail = rest.partition("/")
    if slash and ("." in head or ":" in head or head == "localhost"):
        registry, path = head, tail
    else:
        registry, path = DOCKER_HUB, rest
    last = path.rpartition("/")[2]
    name, _, tag = last.partition(":")
    repository = path[: len(path) - len(last)] + name
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    if not _REPOSITORY.fullmatch(repository) or not registry:
        raise ValueError("not a repository name")
    if (tag and not _TAG.fullmatch(tag)) or (digest and not _DIGEST.fullmatch(digest)):
        raise ValueError("not a tag or digest")
    return Name(registry, repository, tag or ("" if digest else "latest"), digest)


def credentials_for(auths: Json, registry: str) -> Json:
    """The Docker config entry for `registry`: keys are hosts, or URLs of them."""
    wanted = {registry} | (set(_HUB_KEYS) if registry == DOCKER_HUB else set())
    for key, entry in auths.items():
        host = urlsplit(key).netloc if "://" in key else key.split("/", 1)[0]
        if (host in wanted or key in wanted) and isinstance(entry, dict):
            return entry
    return {}


def _basic(entry: Json) -> str | None:
    """`user:password` of an entry, base64, as the Authorization header carries it."""
    if entry.get("auth"):
        return str(entry["auth"])
    if entry.get("username") and entry.get("password"):
        pair = f"{entry['username']}:{entry['password']}"
        return base64.b64encode(pair.encode()).decode()
    return None


def sha256(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _private(host: str) -> bool:
    """Where go-containerregistry also tries plain http: loopback, localhost, RFC 1918."""
    if host.startswith("["):
        bare = host[1 : host.find("]")]
    else:
        bare = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if bare == "localhost":
        return True
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


@dataclass
class Client:
    """One lookup's conversation with one registry about one repository. `schemes`:
    the scheme each registry host answered on, shared between lookups."""

    session: aiohttp.ClientSession
    name: Name
    auths: Json
    schemes: MutableMapping[str, str] = field(default_factory=dict)
    _authorization: str | None = None
    _authenticated: bool = False

    async def manifest(self, ref: str) -> tuple[bytes, str]:
        """The manifest `ref` (a tag or a digest) names, and its digest."""
        path = f"/v2/{self.name.repository}/manifests/{ref}"
        raw, said = await self._get(path, ", ".join(MANIFEST_TYPES), MANIFEST_LIMIT)
        digest = sha256(raw)
        expected = ref if ref.startswith("sha256:") else said
        if expected and expected != digest:
            raise RegistryFailed(REGISTRY_UNAVAILABLE, "sent a manifest that does not hash")
        return raw, digest

    async def blob(self, descriptor: Json) -> bytes:
        """The blob a descriptor names, its size and digest checked."""
        digest = str(descriptor.get("digest") or "")
        if not _DIGEST.fullmatch(digest):
            raise RegistryFailed(IMAGE_NOT_FOUND, "named a blob by no sha256 digest")
        raw, _ = await self._get(f"/v2/{self.name.repository}/blobs/{digest}", "*/*", BLOB_LIMIT)
        if "size" in descriptor and len(raw) != int(descriptor["size"]):
            raise RegistryFailed(REGISTRY_UNAVAILABLE, "sent a blob of another size")
        if sha256(raw) != digest:
            raise RegistryFailed(REGISTRY_UNAVAILABLE, "sent a blob that does not hash")
        return raw

    async def _get(self, path: str, accept: str, limit: int) -> tuple[bytes, str]:
        """The body and Docker-Content-Digest of a GET, authenticating once if asked."""
        url = await self._base() + path
        for _ in range(2):
            status, body, headers = await self._follow(url, accept, limit)
            if status == 401 and not self._authenticated:
                await self._authenticate(headers.get("WWW-Authenticate", ""))
                continue
            _raise_for(status)
            return body, headers.get("Docker-Content-Digest", "")
        raise RegistryFailed(REGISTRY_UNAUTHORIZED, "refused the credentials")

    async def _follow(
        self, url: str, accept: str, limit: int
    ) -> tuple[int, bytes, MutableMapping[str, str]]:
        """GET `url`, following redirects by hand: the credentials go only to the
        registry's own host, never to where a blob is redirected."""
        host = urlsplit(url).netloc
        for _ in range(_REDIRECTS + 1):
            headers = {"Accept": accept}
            if self._authorization and urlsplit(url).netloc == host:
                headers["Authorization"] = self._authorization
            async with self.session.get(url, headers=headers, allow_redirects=False) as answer:
                if answer.status in (301, 302, 303, 307, 308) and "Location" in answer.headers:
                    url = urljoin(url, answer.headers["Location"])
                    continue
                body = await answer.content.read(limit + 1) if answer.status == 200 else b""
                if len(body) > limit:
                    raise RegistryFailed(REGISTRY_UNAVAILABLE, f"sent more than {limit} bytes")
                return answer.status, body, dict(answer.headers)
        raise RegistryFailed(REGISTRY_UNAVAILABLE, "redirected too many times")

    async def _base(self) -> str:
        """`scheme://host`: https, or http for a private registry without TLS."""
        host = self.name.api_host
        if host not in self.schemes:
            scheme = "https"
            if _private(host):
                try:
                    async with self.session.get(f"https://{host}/v2/", allow_redirects=False):
                        pass
                except aiohttp.ClientConnectorCertificateError:
                    pass  # it speaks TLS; a certificate not trusted fails the lookup
                except aiohttp.ClientError:
                    scheme = "http"
            self.schemes[host] = scheme
        return f"{self.schemes[host]}://{host}"

    async def _authenticate(self, challenge: str) -> None:
        """The Authorization the registry's challenge asks for, from the credentials."""
        self._authenticated = True
        entry = credentials_for(self.auths, self.name.registry)
        scheme, _, params_text = challenge.partition(" ")
        if scheme.lower() == "basic":
            basic = _basic(entry)
            if basic is None:
                raise RegistryFailed(REGISTRY_UNAUTHORIZED, "wants credentials")
            self._authorization = f"Basic {basic}"
        elif scheme.lower() == "bearer":
            params = dict(_CHALLENGE.findall(params_text))
            self._authorization = f"Bearer {await self._token(params, entry)}"
        else:
            raise RegistryFailed(REGISTRY_UNAUTHORIZED, "wants credentials")

    async def _token(self, params: dict[str, str], entry: Json) -> str:
        """A pull token from the challenge's realm: anonymous, with the user's password, or
        exchanging an identity token (OAuth2), or the registry token the entry holds."""
        if entry.get("registrytoken"):
            return str(entry["registrytoken"])
        realm = params.get("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise RegistryFailed(REGISTRY_UNAVAILABLE, "named no token service")
        scope = f"repository:{self.name.repository}:pull"
        query = {"scope": scope} | ({"service": params["service"]} if "service" in params else {})
        if entry.get("identitytoken"):
            form = query | {
                "grant_type": "refresh_token",
                "refresh_token": str(entry["identitytoken"]),
                "client_id": "captf",
            }
            request = self.session.post(realm, data=form, allow_redirects=False)
        else:
            basic = _basic(entry)
            headers = {"Authorization": f"Basic {basic}"} if basic else {}
            request = self.session.get(realm, params=query, headers=headers)
        async with request as answer:
            _raise_for(answer.status)
            try:
                found: Json = await answer.json(content_type=None)
            except ValueError:
                raise RegistryFailed(REGISTRY_UNAVAILABLE, "sent a token that is no JSON") from None
        token = found.get("token") or found.get("access_token")
        if not isinstance(token, str) or not token:
            raise RegistryFailed(REGISTRY_UNAVAILABLE, "sent no token")
        return token


def _raise_for(status: int) -> None:
    """A status that is no answer, as a failure of our own words."""
    if status == 200:
        return
    if status in (401, 403):
        raise RegistryFailed(REGISTRY_UNAUTHORIZED, "refused the credentials")
    if status in (400, 404):  # 400: distribution's NAME_INVALID, a name it cannot hold
        raise RegistryFailed(IMAGE_NOT_FOUND, "has no such image")
    raise RegistryFailed(REGISTRY_UNAVAILABLE, f"answered HTTP {status}")
