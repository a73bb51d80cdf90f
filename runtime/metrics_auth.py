"""/metrics over HTTPS, for whoever the API server says may read it.

A scrape carries a bearer token. The API server authenticates it (TokenReview) and
decides whether that user may `get` the non-resource URL `/metrics`
(SubjectAccessReview), as kubebuilder's scaffold and kube-rbac-proxy do; a ClusterRole
granting `nonResourceURLs: [/metrics], verbs: [get]` is what a scraper is bound to.
No token or an unknown one: 401; a known one without the grant: 403. Answers are
remembered for a short while per token, so a scrape every few seconds costs the API
server two requests a minute, not two per scrape.

The serving certificate comes from a directory (`tls.crt`, `tls.key`, as a
cert-manager Secret mounts them) or, without one, is self-signed at start: scrapers
of in-cluster metrics commonly skip verification, and the token is what protects."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from runtime.certs import tls_context
from runtime.clock import Clock
from runtime.errors import ApiError
from runtime.health import parse_address, serve

# How long an answer for one token is remembered, in seconds.
REVIEW_TTL = 30.0
METRICS_PATH = "/metrics"


class Api(Protocol):
    async def request(self, method: str, path: str, *, body: object = None) -> dict[str, Any]: ...


class Reviewer(Protocol):
    async def status(self, token: str) -> int:
        """200 when the token's user may read /metrics, 403 when not, 401 when the token
        is not a user's."""
        ...


class KubeReviewer:
    """Asks the API server (TokenReview, then SubjectAccessReview), and remembers."""

    def __init__(self, api: Api, clock: Clock, ttl: float = REVIEW_TTL) -> None:
        self._api = api
        self._clock = clock
        self._ttl = ttl
        self._answers: dict[str, tuple[float, int]] = {}  # sha256(token) -> (until, status)

    async def status(self, token: str) -> int:
        key = hashlib.sha256(token.encode()).hexdigest()  # the token itself is not kept
        now = self._clock.monotonic()
        known = self._answers.get(key)
        if known is not None and known[0] > now:
            return known[1]
        answer = await self._review(token)
        # Expired entries go as new ones come: the map holds at most the recent scrapers.
        self._answers = {k: v for k, v in self._answers.items() if v[0] > now}
        self._answers[key] = (now + self._ttl, answer)
        return answer

    async def _review(self, token: str) -> int:
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        found = await self._api.request(
            "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=review
        )
        status = found.get("status") or {}
        if not status.get("authenticated"):
            return 401
        user = status.get("user") or {}
        spec = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "uid": user.get("uid", ""),
            "extra": user.get("extra") or {},
            "nonResourceAttributes": {"path": METRICS_PATH, "verb": "get"},
        }
        access = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        decided = await self._api.request(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=access
        )
        return 200 if (decided.get("status") or {}).get("allowed") else 403


def bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class SecureMetricsServer:
    """`async with SecureMetricsServer(registry, reviewer, address=...)`: HTTPS /metrics
    for reviewed bearer tokens, until the block ends."""

    def __init__(
        self,
        registry: CollectorRegistry,
        reviewer: Reviewer,
        *,
        address: str,
        cert_dir: Path | None = None,
    ) -> None:
        self._registry = registry
        self._reviewer = reviewer
        self._host, self._port = parse_address(address)
        self._cert_dir = cert_dir
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        return self._port

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get(METRICS_PATH, self._metrics)
        with tempfile.TemporaryDirectory(prefix="captf-metrics-") as work:
            # The context holds the pair in memory once loaded: the files may go.
            context = tls_context(self._cert_dir, Path(work))
        self._runner, self._port = await serve(app, self._host, self._port, ssl_context=context)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        token = bearer_token(request)
        if token is None:
            return _refused(401, "a bearer token is required")
        try:
            status = await self._reviewer.status(token)
        except ApiError as error:
            # The API server could not answer: nobody is let in meanwhile.
            return _refused(503, f"cannot review the token: {error.status} {error.reason}")
        if status != 200:
            return _refused(status, "forbidden" if status == 403 else "unauthorized")
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _refused(status: int, text: str) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="captf"'} if status == 401 else None
    return web.Response(status=status, text=text + "\n", headers=headers)
