"""The fault proxy itself, with boto3 in front of moto (no provider needed): it relays,
answers the calls a rule names as the service's protocol shapes an error, counts down a
rule's times, and refuses connections while down."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
import pytest

from tests.aws.fault_proxy import EXPIRED, RATE_EXCEEDED, THROTTLED, UNAVAILABLE, FaultProxy, Rule
from tests.aws.moto import Moto, moto_server

# No retries of boto3's own: each call is one request.
ONCE = botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"})


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as running:
        yield running


@pytest.fixture
def proxy(moto: Moto) -> Iterator[FaultProxy]:
    with FaultProxy(moto.url) as running:
        yield running


def client(proxy: FaultProxy, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=proxy.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=ONCE,
    )


def code_of(call: Callable[[], object]) -> tuple[int, str]:
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        call()
    response = raised.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_calls_pass_through_to_moto(proxy: FaultProxy) -> None:
    ec2 = client(proxy, "ec2")
    zones = ec2.describe_availability_zones()["AvailabilityZones"]
    assert zones
    [call] = proxy.calls
    assert (call.service, call.action, call.status, call.faulted) == (
        "ec2",
        "DescribeAvailabilityZones",
        200,
        False,
    )


@pytest.mark.parametrize(
    ("rule", "service", "expected"),
    [
        (Rule(THROTTLED, service="ec2"), "ec2", (503, "RequestLimitExceeded")),
        (Rule(RATE_EXCEEDED, service="elasticloadbalancing"), "elbv2", (400, "Throttling")),
        (Rule(EXPIRED, service="sts"), "sts", (400, "ExpiredToken")),
    ],
)
def test_a_fault_is_answered_in_the_services_error_shape(
    proxy: FaultProxy, rule: Rule, service: str, expected: tuple[int, str]
) -> None:
    proxy.fault(rule)
    calls: dict[str, Callable[[Any], object]] = {
        "ec2": lambda c: c.describe_vpcs(),
        "elbv2": lambda c: c.describe_load_balancers(),
        "sts": lambda c: c.get_caller_identity(),
    }
    made = client(proxy, service)
    assert code_of(lambda: calls[service](made)) == expected


def test_a_bare_status_reads_as_an_unknown_error(proxy: FaultProxy) -> None:
    proxy.fault(Rule(UNAVAILABLE))
    status, code = code_of(lambda: client(proxy, "ec2").describe_vpcs())
    assert status == 503
    assert code in ("503", "ServiceUnavailable", "Unavailable")


def test_a_rule_counts_down_and_names_its_action(proxy: FaultProxy) -> None:
    proxy.fault(Rule(THROTTLED, service="ec2", action="DescribeVpcs", times=3))
    ec2 = client(proxy, "ec2")
    for _ in range(3):
        assert code_of(lambda: ec2.describe_vpcs())[1] == "RequestLimitExceeded"
    ec2.describe_availability_zones()  # another action: never faulted
    ec2.describe_vpcs()  # the fourth passes
    assert [c.faulted for c in proxy.calls] == [True, True, True, False, False]


def test_down_refuses_connections_until_up(proxy: FaultProxy) -> None:
    ec2 = client(proxy, "ec2")
    proxy.down()
    with pytest.raises(botocore.exceptions.EndpointConnectionError):
        ec2.describe_vpcs()
    proxy.up()
    assert ec2.describe_vpcs()["Vpcs"] is not None


def test_down_after_an_action_refuses_the_calls_after_its_answer(proxy: FaultProxy) -> None:
    ec2 = client(proxy, "ec2")
    proxy.down_after("CreateVpc")
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    assert proxy.went_down.wait(10)
    with pytest.raises(botocore.exceptions.EndpointConnectionError):
        ec2.describe_vpcs(VpcIds=[vpc])
    proxy.up()
    assert ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"][0]["VpcId"] == vpc
