"""The cloud's own transient errors, recognised in a failed tofu command's output.

A failure is a cloud error only when every `Error:` diagnostic tofu printed carries a
signal of this table; one diagnostic without one (a module mistake, a denied call, an
unknown code) leaves the failure as its step's kind. Recognised signals only, never
"transient unless it looks permanent": an unfamiliar message is never called transient.
Nothing here changes when a failed op runs again (the backoff is the same for every
counted failure, docs/decisions.md); the kind says who should act, the operator of a
throttled account or the author of a broken module.

Each row names the cloud, the codes as its SDK prints them, the kind and the source that
documents the code as transient. Left out on purpose: AWS `LimitExceededException` (the
SDK retries it, but IAM, ELB and others use it for a quota that waiting never raises),
AWS `RequestExpired` (a clock that is off, more often than a slow request), GCP
`RESOURCE_EXHAUSTED` and `QUOTA_EXCEEDED` (quota, not rate) and Azure `SkuNotAvailable`
(a size the region or subscription does not offer). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class CloudKind(StrEnum):
    """The kinds of a recognised cloud error; run_report.ErrorKind holds the same values."""

    THROTTLED = "cloud-throttled"  # the API refused the rate of calls
    CAPACITY = "cloud-capacity"  # the zone or region had no room for what was asked
    UNAVAILABLE = "cloud-unavailable"  # the API answered 5xx, or did not answer at all
    CREDENTIALS = "cloud-credentials"  # a short-lived credential expired mid-run


@dataclass(frozen=True)
class Row:
    """Codes of one cloud, one kind and one form. `form` is a regex with `{code}` where
    a code stands; the signal found is `<cloud>:<name>`, `name` with the code in it."""

    cloud: str
    kind: CloudKind
    codes: tuple[str, ...]
    form: str
    source: str
    name: str = "{code}"

    def signal(self, code: str) -> str:
        return f"{self.cloud}:{self.name.format(code=code)}"


# How each SDK prints an error's code or status inside the provider's diagnostic.
_AWS_CODE = r"\bapi error (?P<code>{code}):"  # smithy-go: `api error Throttling: Rate exceeded`
_AWS_STATUS = r"\bhttps response error StatusCode: (?P<code>{code})\b"
_AZURE_CODE = r"(?:Code=\"|ERROR CODE: |with error: |\"code\": ?\")(?P<code>{code})\b"
_AZURE_STATUS = r"(?:Status(?:Code)?=|unexpected status |RESPONSE )(?P<code>{code})\b"
_GCP_STATUS = r"\bgoogleapi: Error (?P<code>{code}):"
_WORD = r"\b(?P<code>{code})\b"
_TEXT = r"(?P<code>{code})"

_AWS_ERRORS = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html"
_AWS_COMMON = "https://docs.aws.amazon.com/STS/latest/APIReference/CommonErrors.html"
_AWS_RETRY = "github.com/aws/aws-sdk-go-v2 aws/retry/standard.go (DefaultThrottleErrorCodes)"
_AZURE_RETRY = "github.com/Azure/azure-sdk-for-go sdk/azcore/runtime/policy_retry.go"
_GCP_ERRORS = "https://cloud.google.com/apis/design/errors"
_AWS_NET = "github.com/aws/aws-sdk-go-v2 aws/retry/retryable_error.go (RetryableConnectionError)"

ROWS: Final[tuple[Row, ...]] = (
    Row(
        "aws",
        CloudKind.CREDENTIALS,
        ("ExpiredToken", "ExpiredTokenException"),
        _AWS_CODE,
        f"{_AWS_COMMON}; github.com/hashicorp/aws-sdk-go-base servicemocks/mock.go",
    ),
    Row(
        "aws",
        CloudKind.THROTTLED,
        (
            "RequestLimitExceeded",
            "Throttling",
            "ThrottlingException",
            "ThrottledException",
            "RequestThrottledException",
            "RequestThrottled",
            "TooManyRequestsException",
            "EC2ThrottledException",
            "SlowDown",
            "ProvisionedThroughputExceededException",
            "BandwidthLimitExceeded",
            "PriorRequestNotComplete",
        ),
        _AWS_CODE,
        f"{_AWS_RETRY}; https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html",
    ),
    Row(
        "aws",
        CloudKind.CAPACITY,
        (
            "InsufficientInstanceCapacity",
            "InsufficientHostCapacity",
            "InsufficientAddressCapacity",
            "InsufficientReservedInstanceCapacity",
            "InsufficientCapacity",
        ),
        _AWS_CODE,
        _AWS_ERRORS,
    ),
    Row(
        "aws",
        CloudKind.UNAVAILABLE,
        ("ServiceUnavailable", "ServiceUnavailableException", "Unavailable", "InternalError"),
        _AWS_CODE,
        f"{_AWS_ERRORS} (server error codes); {_AWS_COMMON}",
    ),
    Row(
        "aws",
        CloudKind.UNAVAILABLE,
        ("InternalFailure",),
        _AWS_CODE,
        _AWS_COMMON,
    ),
    # A 5xx without a code the SDK can read prints `api error UnknownError`.
    Row(
        "aws",
        CloudKind.UNAVAILABLE,
        ("500", "502", "503", "504"),
        _AWS_STATUS,
        "github.com/aws/aws-sdk-go-v2 aws/retry/standard.go (DefaultRetryableHTTPStatusCodes)",
        "HTTP{code}",
    ),
    Row(
        "azure",
        CloudKind.CREDENTIALS,
        ("ExpiredAuthenticationToken",),
        _AZURE_CODE,
        "https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-codes",
    ),
    Row(
        "azure",
        CloudKind.CREDENTIALS,
        ("AADSTS700024",),
        _WORD,
        "https://learn.microsoft.com/entra/identity-platform/reference-error-codes",
    ),
    Row(
        "azure",
        CloudKind.THROTTLED,
        ("TooManyRequests", "SubscriptionRequestsThrottled", "TooManyRequestsReceived"),
        _AZURE_CODE,
        "https://learn.microsoft.com/azure/azure-resource-manager/management/"
        "request-limits-and-throttling; https://learn.microsoft.com/troubleshoot/azure/"
        "virtual-machines/troubleshooting-throttling-errors",
    ),
    Row("azure", CloudKind.THROTTLED, ("429",), _AZURE_STATUS, _AZURE_RETRY, "HTTP{code}"),
    Row(
        "azure",
        CloudKind.CAPACITY,
        (
            "AllocationFailed",
            "ZonalAllocationFailed",
            "OverconstrainedAllocationRequest",
            "OverconstrainedZonalAllocationRequest",
        ),
        _AZURE_CODE,
        "https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/"
        "allocation-failure",
    ),
    Row("azure", CloudKind.UNAVAILABLE, ("ServiceUnavailable",), _AZURE_CODE, _AZURE_RETRY),
    Row(
        "azure",
        CloudKind.UNAVAILABLE,
        ("500", "502", "503", "504"),
        _AZURE_STATUS,
        _AZURE_RETRY,
        "HTTP{code}",
    ),
    Row(
        "gcp",
        CloudKind.CREDENTIALS,
        ("oauth2: token expired and refresh token is not set",),
        _TEXT,
        "golang.org/x/oauth2 oauth2.go (reuseTokenSource.Token)",
        "token-expired",
    ),
    Row(
        "gcp",
        CloudKind.THROTTLED,
        ("rateLimitExceeded", "userRateLimitExceeded"),
        _WORD,
        f"{_GCP_ERRORS}; https://cloud.google.com/service-usage/docs/troubleshooting",
    ),
    Row(
        "gcp",
        CloudKind.THROTTLED,
        ("429",),
        _GCP_STATUS,
        _GCP_ERRORS,
        "HTTP{code}",
    ),
    Row(
        "gcp",
        CloudKind.CAPACITY,
        ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "ZONE_RESOURCE_POOL_EXHAUSTED"),
        _WORD,
        "https://cloud.google.com/compute/docs/resource-error",
    ),
    Row(
        "gcp",
        CloudKind.UNAVAILABLE,
        ("500", "502", "503", "504"),
        _GCP_STATUS,
        _GCP_ERRORS,
        "HTTP{code}",
    ),
    Row("gcp", CloudKind.UNAVAILABLE, ("backendError",), _WORD, _GCP_ERRORS),
    # Whatever the cloud: its endpoint refused or dropped the connection.
    Row(
        "net",
        CloudKind.UNAVAILABLE,
        ("connect: connection refused",),
        _TEXT,
        _AWS_NET,
        "connection-refused",
    ),
    Row(
        "net",
        CloudKind.UNAVAILABLE,
        ("connection reset by peer",),
        _TEXT,
        _AWS_NET,
        "connection-reset",
    ),
)


@dataclass(frozen=True)
class Signal:
    """A recognised signal: `<cloud>:<code>` and its kind."""

    name: str
    kind: CloudKind


def _compiled(row: Row) -> re.Pattern[str]:
    codes = "|".join(re.escape(code) for code in row.codes)
    return re.compile(row.form.format(code=codes))


_PATTERNS: Final = tuple((row, _compiled(row)) for row in ROWS)
# Every signal name the table can give, with its kind: what a result may carry.
SIGNALS: Final[dict[str, CloudKind]] = {
    row.signal(code): row.kind for row in ROWS for code in row.codes
}
# Where each diagnostic starts; a warning ends the error before it.
_DIAGNOSTIC = re.compile(r"^[ \t]*(?:│[ \t]*)?(Error|Warning):", re.MULTILINE)


def recognise(stderr: str) -> Signal | None:
    """The signal of the first error diagnostic in tofu's stderr, when every error
    diagnostic carries one; None when there is no diagnostic or one carries none."""
    found: list[Signal] = []
    for text in _errors(stderr):
        signal = signal_in(text)
        if signal is None:
            return None
        found.append(signal)
    return found[0] if found else None


def signal_in(text: str) -> Signal | None:
    """The first row's signal found in one diagnostic, in the table's order: a code the
    SDK read wins over the bare HTTP status the same line carries."""
    for row, pattern in _PATTERNS:
        match = pattern.search(text)
        if match is not None:
            return Signal(row.signal(match.group("code")), row.kind)
    return None


def _errors(stderr: str) -> list[str]:
    """Each error diagnostic's text, from its headline to the next diagnostic."""
    starts = list(_DIAGNOSTIC.finditer(stderr))
    ends = [m.start() for m in starts[1:]] + [len(stderr)] if starts else []
    return [stderr[m.start() : end] for m, end in zip(starts, ends, strict=True) if m[1] == "Error"]
