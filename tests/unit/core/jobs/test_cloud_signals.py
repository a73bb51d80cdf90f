"""The cloud's own errors, recognised from a failed tofu command's stderr: each signal of
the table in the form its provider prints it, the rule that every error diagnostic must
carry one, and what a result may claim."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from controller.core.jobs.cloud_signals import ROWS, SIGNALS, CloudKind, recognise
from controller.core.jobs.run_report import CLOUD_KINDS, ERROR_KINDS, signal_of, valid_error

CRDS = Path(__file__).resolve().parents[4] / "manifests" / "crds"


def diagnostic(text: str) -> str:
    """One error diagnostic as tofu frames it."""
    return f"╷\n│ Error: {text}\n│\n│   with module.role.aws_vpc.this,\n╵\n"


AWS_CALL = (
    "operation error EC2: CreateVpc, https response error StatusCode: {status}, RequestID: 1f"
)
MINUTE = "exceeded maximum number of attempts, 25, "

CASES = [
    # AWS, as terraform-provider-aws prints the SDK's error (aws-sdk-go-v2 / smithy-go).
    (
        f"creating EC2 VPC: {AWS_CALL.format(status=503)}, api error RequestLimitExceeded: "
        "Request limit exceeded.",
        "aws:RequestLimitExceeded",
        CloudKind.THROTTLED,
    ),
    (
        "creating ELBv2 Load Balancer: operation error Elastic Load Balancing v2: "
        f"CreateLoadBalancer, {MINUTE}https response error StatusCode: 400, RequestID: 2a, "
        "api error Throttling: Rate exceeded",
        "aws:Throttling",
        CloudKind.THROTTLED,
    ),
    (
        f"creating EC2 Instance: {AWS_CALL.format(status=500)}, api error "
        "InsufficientInstanceCapacity: We currently do not have sufficient m5.large capacity",
        "aws:InsufficientInstanceCapacity",
        CloudKind.CAPACITY,
    ),
    (
        "retrieving account details: validating provider credentials: retrieving caller "
        "identity from STS: operation error STS: GetCallerIdentity, https response error "
        "StatusCode: 403, RequestID: 3b, api error ExpiredToken: The security token included "
        "in the request is expired",
        "aws:ExpiredToken",
        CloudKind.CREDENTIALS,
    ),
    (
        f"reading EC2 VPC: {AWS_CALL.format(status=503)}, api error UnknownError: UnknownError",
        "aws:HTTP503",
        CloudKind.UNAVAILABLE,
    ),
    (
        f"reading EC2 VPC: {AWS_CALL.format(status=503)}, api error ServiceUnavailable: down",
        "aws:ServiceUnavailable",
        CloudKind.UNAVAILABLE,
    ),
    (
        f"reading EC2 VPC: operation error EC2: DescribeVpcs, {MINUTE}https response error "
        'StatusCode: 0, RequestID: , request send failed, Post "http://127.0.0.1:40411/": '
        "dial tcp 127.0.0.1:40411: connect: connection refused",
        "net:connection-refused",
        CloudKind.UNAVAILABLE,
    ),
    # Azure, in the three shapes azurerm's SDKs print (autorest, go-azure-sdk, azcore).
    (
        "creating Virtual Network: network.VirtualNetworksClient#CreateOrUpdate: Failure "
        'sending request: StatusCode=429 -- Original Error: Code="TooManyRequests" '
        'Message="Number of write requests for subscription exceeded the limit"',
        "azure:TooManyRequests",
        CloudKind.THROTTLED,
    ),
    (
        'creating Linux Virtual Machine: polling after CreateOrUpdate: Code="AllocationFailed" '
        'Message="Allocation failed. We do not have sufficient capacity for the requested VM '
        'size in this region."',
        "azure:AllocationFailed",
        CloudKind.CAPACITY,
    ),
    (
        "retrieving Resource Group: unexpected status 503 (503 Service Unavailable) with "
        "error: ServiceUnavailable: The service is temporarily unavailable",
        "azure:ServiceUnavailable",
        CloudKind.UNAVAILABLE,
    ),
    (
        "listing keys: RESPONSE 502: 502 Bad Gateway\nERROR CODE UNAVAILABLE",
        "azure:HTTP502",
        CloudKind.UNAVAILABLE,
    ),
    (
        "building account: ExpiredAuthenticationToken: The access token expiry UTC time is "
        'earlier than current UTC time. Code="ExpiredAuthenticationToken"',
        "azure:ExpiredAuthenticationToken",
        CloudKind.CREDENTIALS,
    ),
    (
        "obtaining token: AADSTS700024: Client assertion is not within its valid time range.",
        "azure:AADSTS700024",
        CloudKind.CREDENTIALS,
    ),
    # GCP, as terraform-provider-google prints googleapi's errors.
    (
        "Error creating Network: googleapi: Error 403: Rate Limit Exceeded, rateLimitExceeded",
        "gcp:rateLimitExceeded",
        CloudKind.THROTTLED,
    ),
    (
        "Error creating instance: googleapi: Error 429: Quota exceeded for quota metric "
        "'Queries' and limit 'Queries per minute', too many requests",
        "gcp:HTTP429",
        CloudKind.THROTTLED,
    ),
    (
        "Error waiting for instance to create: The zone 'projects/p/zones/z' does not have "
        "enough resources available to fulfill the request. ZONE_RESOURCE_POOL_EXHAUSTED",
        "gcp:ZONE_RESOURCE_POOL_EXHAUSTED",
        CloudKind.CAPACITY,
    ),
    (
        "Error reading Subnetwork: googleapi: Error 503: The service is currently "
        "unavailable., backendError",
        "gcp:HTTP503",
        CloudKind.UNAVAILABLE,
    ),
    (
        'Post "https://compute.googleapis.com/x": oauth2: token expired and refresh token '
        "is not set",
        "gcp:token-expired",
        CloudKind.CREDENTIALS,
    ),
]


@pytest.mark.parametrize(("text", "signal", "kind"), CASES, ids=[c[1] for c in CASES])
def test_each_signal_is_recognised_as_its_provider_prints_it(
    text: str, signal: str, kind: CloudKind
) -> None:
    found = recognise(diagnostic(text))
    assert found is not None
    assert (found.name, found.kind) == (signal, kind)


# What must never read as transient: a permanent error whose words are close to one.
NOT_TRANSIENT = [
    # IAM's quota: the SDK retries the code, but waiting never raises the quota.
    "creating IAM Role: operation error IAM: CreateRole, https response error StatusCode: "
    "409, RequestID: 4c, LimitExceeded: Cannot exceed quota for RolesPerAccount: 1000",
    f"creating EC2 Instance: {AWS_CALL.format(status=400)}, api error InvalidAMIID.NotFound: "
    "The image id '[ami-1]' does not exist",
    f"creating EC2 VPC: {AWS_CALL.format(status=403)}, api error UnauthorizedOperation: "
    "You are not authorized to perform this operation.",
    # A clock that is off, not a slow request.
    f"reading EC2 VPC: {AWS_CALL.format(status=400)}, api error RequestExpired: Request has "
    "expired.",
    "Error creating instance: googleapi: Error 403: Quota 'CPUS' exceeded.  Limit: 24.0 in "
    "region us-central1., quotaExceeded",
    'creating Linux Virtual Machine: Code="SkuNotAvailable" Message="The requested size for '
    'resource is currently not available in location"',
    # A module's own words that merely mention throttling.
    'Invalid value for variable: "Throttling" is not an allowed instance type',
    "simulated cloud API error: throttled (attempt 1)",
]


@pytest.mark.parametrize("text", NOT_TRANSIENT)
def test_a_permanent_or_unknown_error_is_not_a_cloud_signal(text: str) -> None:
    assert recognise(diagnostic(text)) is None


THROTTLED = diagnostic(
    f"creating EC2 VPC: {AWS_CALL.format(status=503)}, api error "
    "RequestLimitExceeded: Request limit exceeded."
)
CAPACITY = diagnostic(
    f"creating EC2 Instance: {AWS_CALL.format(status=500)}, api error "
    "InsufficientInstanceCapacity: none left"
)
BROKEN = diagnostic('Unsupported argument: An argument named "colour" is not expected here.')


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (THROTTLED + CAPACITY, "aws:RequestLimitExceeded"),  # every one carries one: the first
        (CAPACITY + THROTTLED, "aws:InsufficientInstanceCapacity"),
        (THROTTLED + BROKEN, None),  # one without a signal: not the cloud's failure
        (BROKEN + THROTTLED, None),
        ("╷\n│ Warning: Deprecated attribute\n╵\n" + THROTTLED, "aws:RequestLimitExceeded"),
        ("exit status 1 and nothing else\n", None),  # no diagnostic at all
        ("", None),
    ],
)
def test_every_error_diagnostic_must_carry_a_signal(stderr: str, expected: str | None) -> None:
    found = recognise(stderr)
    assert (found.name if found else None) == expected


def test_a_warning_that_mentions_a_signal_does_not_vouch_for_an_error_without_one() -> None:
    warning = "╷\n│ Warning: retrying after api error Throttling: Rate exceeded\n╵\n"
    assert recognise(warning + BROKEN) is None
    assert recognise(warning) is None  # warnings alone: nothing failed here


@given(st.text(max_size=300))
def test_text_without_any_error_headline_is_never_a_cloud_error(text: str) -> None:
    if "Error:" not in text:
        assert recognise(text) is None


def test_the_table_kinds_are_error_kinds_with_a_source_each() -> None:
    assert {kind.value for kind in CloudKind} == CLOUD_KINDS <= ERROR_KINDS
    for row in ROWS:
        assert row.source
        assert row.codes
    assert set(SIGNALS.values()) == set(CloudKind)


def test_every_signal_fits_the_crd_field() -> None:
    for kind in ("terraformclusters", "terraformmachines", "terraformmachinepools"):
        crd = yaml.safe_load((CRDS / f"infrastructure.cluster.x-k8s.io_{kind}.yaml").read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        field = schema["properties"]["status"]["properties"]["lastRun"]["properties"]["signal"]
        assert max(len(name) for name in SIGNALS) <= field["maxLength"]


@pytest.mark.parametrize(
    ("error", "valid"),
    [
        ({"kind": "cloud-throttled", "signal": "aws:Throttling"}, True),
        ({"kind": "cloud-throttled", "signal": "aws:ExpiredToken"}, False),  # not its kind
        ({"kind": "cloud-throttled"}, False),  # a cloud kind names its signal
        ({"kind": "cloud-throttled", "signal": "aws:MadeUp"}, False),  # not in the table
        ({"kind": "apply", "signal": "aws:Throttling"}, False),  # a signal only with its kind
        ({"kind": "apply", "summary": "x"}, True),
    ],
)
def test_a_result_may_claim_only_a_signal_of_the_table_with_its_kind(
    error: dict[str, str], valid: bool
) -> None:
    assert valid_error(error) is valid
    assert (signal_of(error) is not None) is (valid and "signal" in error)
