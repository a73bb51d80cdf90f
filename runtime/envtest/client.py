"""A small synchronous HTTPS client for fixtures and launcher checks (stdlib only).

Not the project's transport: it exists so that starting the server, installing
CRDs and preparing test objects need no event loop and no third-party client."""

from __future__ import annotations

import contextlib
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from http.client import HTTPResponse
from typing import Any

from runtime.envtest.pki import Pki


class RequestFailed(Exception):
    """A non-2xx answer. `reason` and `message` come from the Status body when there is one."""

    def __init__(self, status: int, body: dict[str, Any] | None, text: str) -> None:
        self.status = status
        self.body = body
        self.reason = str(body.get("reason", "")) if body else ""
        self.message = str(body.get("message", "")) if body else text
        super().__init__(f"HTTP {status} {self.reason}: {self.message}")


def admin_ssl_context(pki: Pki) -> ssl.SSLContext:
    """Trusts only the envtest CA and presents the admin (system:masters) certificate."""
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return ctx


class Client:
    def __init__(self, base_url: str, ctx: ssl.SSLContext | None) -> None:
        self._base = base_url.rstrip("/")
        self._ctx = ctx

    def url(self, path: str, params: Mapping[str, str] | None = None) -> str:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return f"{self._base}{path}{query}"

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        content_type: str = "application/json",
        *,
        params: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """One call; the JSON answer as a dict ({} for an empty body). Raises RequestFailed."""
        with self._open(method, path, body, content_type, params, timeout) as resp:
            data = resp.read()
        if not data:
            return {}
        parsed: dict[str, Any] = json.loads(data)
        return parsed

    def ok(self, path: str, *, timeout: float = 2.0) -> bool:
        """Whether GET `path` answers 2xx now (a readiness probe; never raises)."""
        try:
            with self._open("GET", path, None, "application/json", None, timeout):
                return True
        except (OSError, RequestFailed):
            return False

    @contextlib.contextmanager
    def stream(
        self, path: str, params: Mapping[str, str], *, timeout: float = 30.0
    ) -> Iterator[Iterator[dict[str, Any]]]:
        """A watch: yields its events (one JSON object per line) until the server ends it.

        `timeout` bounds each read, so a silent stream raises TimeoutError rather
        than hanging a test."""
        with self._open("GET", path, None, "application/json", params, timeout) as resp:
            yield _lines(resp)

    def _open(
        self,
        method: str,
        path: str,
        body: object,
        content_type: str,
        params: Mapping[str, str] | None,
        timeout: float,
    ) -> contextlib.closing[HTTPResponse]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url(path, params), data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            resp: HTTPResponse = urllib.request.urlopen(req, timeout=timeout, context=self._ctx)
        except urllib.error.HTTPError as err:
            raise _failure(err) from None
        return contextlib.closing(resp)


def _lines(resp: HTTPResponse) -> Iterator[dict[str, Any]]:
    while line := resp.readline():
        if line.strip():
            event: dict[str, Any] = json.loads(line)
            yield event


def _failure(err: urllib.error.HTTPError) -> RequestFailed:
    text = err.read().decode(errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    return RequestFailed(err.code, body if isinstance(body, dict) else None, text)
