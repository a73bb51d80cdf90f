"""API errors as data, and the one rule for which failures are worth retrying.

Every non-2xx answer from the API server becomes an `ApiError` carrying the
`Status` the server sent; `is_transient` is the single place that decides
whether a failure is the server's or the network's momentary trouble (retry it)
or a statement about the request itself (do not hot-loop on it)."""

from __future__ import annotations

import errno
import sys
from collections.abc import Mapping
from typing import Any

import orjson

# Status codes that say "try again later", not "your request is wrong".
# 409 Conflict is here because it is an optimistic-concurrency miss: a re-read and retry succeeds.
_TRANSIENT_STATUSES = frozenset({409, 429})

# Socket errors that mean the peer or the path to it failed, not the request.
_NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.EHOSTDOWN,
    }
)


class ConfigError(Exception):
    """No cluster to talk to: no kubeconfig, one without a current context, or no
    in-cluster service account. The message says which, in the client library's words."""


class ApiError(Exception):
    """A non-2xx answer. `reason` is the Status reason ("NotFound", "Conflict", "Gone", ...)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.retry_after = retry_after

    @classmethod
    def from_status(
        cls, status: dict[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> ApiError:
        """From a decoded `Status` object, as sent in a response body or a watch ERROR event."""
        details = status.get("details")
        retry_after = _retry_after(headers, details if isinstance(details, dict) else None)
        return cls(
            int(status.get("code") or 0),
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
            body=status,
            retry_after=retry_after,
        )

    @classmethod
    def from_response(
        cls, http_status: int, payload: bytes, headers: Mapping[str, str] | None = None
    ) -> ApiError:
        """From a raw HTTP answer; the body may be a Status, other JSON, or not JSON at all."""
        try:
            decoded = orjson.loads(payload) if payload else None
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and decoded.get("kind") == "Status":
            error = cls.from_status(decoded, headers=headers)
            # The HTTP status is authoritative; a Status body may omit `code`.
            error.status = http_status
            return error
        text = payload[:500].decode("utf-8", "replace").strip()
        return cls(
            http_status,
            _REASONS.get(http_status, ""),
            text,
            body=decoded if isinstance(decoded, dict) else None,
            retry_after=_retry_after(headers, None),
        )


def _retry_after(headers: Mapping[str, str] | None, details: dict[str, Any] | None) -> float | None:
    # The header wins: it is what the server's flow control actually set.
    if headers is not None:
        value = headers.get("Retry-After")
        if value is not None:
            try:
                return max(float(value), 0.0)
            except ValueError:
                pass  # an HTTP-date: rare from kube-apiserver; fall back to the Status details.
    if details is not None and isinstance(details.get("retryAfterSeconds"), int | float):
        return max(float(details["retryAfterSeconds"]), 0.0)
    return None


# Reasons for answers that carry no Status body (proxies, load balancers, a crashing server).
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def is_transient(exc: BaseException) -> bool:
    """True for failures that a later identical attempt may not meet.

    409, 429 and 5xx answers, timeouts, and a broken or refused connection are
    transient; everything else (validation, permissions, not found, bugs) is not."""
    if isinstance(exc, ApiError):
        return exc.status in _TRANSIENT_STATUSES or exc.status >= 500
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    # aiohttp's own errors exist only once it is imported; a process that talks through
    # runtime.transport.thin never imports it (about 0.1 s of CPU at each start).
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None and isinstance(
        exc, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError
    ):
        return True
    if isinstance(exc, OSError):
        return exc.errno in _NETWORK_ERRNOS
    return False


def is_not_found(exc: BaseException, *, group: str, plural: str, name: str) -> bool:
    """True when `exc` is the API server's 404 for the object `name` of that resource
    itself: its Status details name the object, so the object is gone (deleted, its last
    finalizer removed), not some other object the request depended on."""
    if not isinstance(exc, ApiError) or exc.status != 404:
        return False
    details = (exc.body or {}).get("details")
    if not isinstance(details, dict):
        return False
    return (details.get("group", ""), details.get("kind"), details.get("name")) == (
        group,
        plural,
        name,
    )
