"""The cloud's own errors, end to end: the cluster module of modules/aws on its image,
the real AWS provider, and the fault proxy in front of moto answering as a troubled AWS
would. Each failure is named by its kind and signal (status.lastRun, the
ApplyJobSucceeded message, the failures counter), retried on the seed's timing like any
other failure, and the next apply converges once the fault is gone.

The cluster is given its endpoint (spec.controlPlaneEndpoint), so the module makes its
network and security groups but no load balancer: the flows here are about errors,
and a load balancer's wait for `active` would only add a minute to each."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.jsonobj import Json
from tests.aws.fault_proxy import EXPIRED, THROTTLED, UNAVAILABLE, Fault, FaultProxy, Rule
from tests.aws.moto import Moto, credentials
from tests.e2e.system import RUNNER_ACCOUNT, WAIT, System, ended, result_of
from tests.kube.harness import condition, events_of, state_of

pytestmark = [pytest.mark.aws, pytest.mark.kube, pytest.mark.e2e]

NAME = "net"
ENDPOINT = {"host": "api.example.invalid", "port": 6443}
# One retry of the provider's own, so a call that keeps failing fails the step at once.
FAST = {"availability_zones": ["us-east-1a"], "max_retries": 1}
LONG = 6 * WAIT


async def cluster_on(
    system: System, images: dict[str, str], proxy: FaultProxy, variables: Json, **spec: Any
) -> None:
    """The credentials that make moto, through the proxy, the runners' AWS, and the
    TerraformCluster on the cluster image."""
    await system.kube.call(
        "POST",
        f"/api/v1/namespaces/{system.kube.ns}/secrets",
        {"metadata": {"name": "creds"}, "stringData": credentials(proxy.url)},
    )
    await system.kube.setup_cluster(
        NAME,
        files={},
        jobs={"serviceAccountName": RUNNER_ACCOUNT} | spec.pop("jobs", {}),
        variables=variables,
        source={"image": images["cluster"], "imagePullPolicy": "IfNotPresent"},
        controlPlaneEndpoint=ENDPOINT,
        **spec,
    )


async def live(system: System) -> Json:
    obj: Json = await system.kube.call("GET", system.kube.captf_path("terraformclusters", NAME))
    return obj


def vpcs(moto: Moto) -> list[str]:
    found = moto.client("ec2").describe_vpcs()["Vpcs"]
    return sorted(v["VpcId"] for v in found if not v.get("IsDefault"))


async def converged(system: System, moto: Moto, seq: int) -> Json:
    """The apply of attempt `seq` succeeded, and moto holds exactly one VPC: the state's."""
    job = await system.finished_job(NAME, "apply", seq, within=LONG)
    assert ended(job) == "Complete", system.log(job)
    document = await system.kube.state_document(state_of(system.kube, NAME))
    [vpc] = [r for r in document["resources"] if r["type"] == "aws_vpc"]
    assert vpcs(moto) == [vpc["instances"][0]["attributes"]["id"]]
    return job


CASES = [
    (Rule(THROTTLED, service="ec2"), "cloud-throttled", "aws:RequestLimitExceeded"),
    (Rule(UNAVAILABLE, service="ec2"), "cloud-unavailable", "aws:HTTP503"),
    (Rule(EXPIRED, service="sts"), "cloud-credentials", "aws:ExpiredToken"),
]


@pytest.mark.parametrize(("rule", "kind", "signal"), CASES, ids=[c[1] for c in CASES])
async def test_a_cloud_error_is_named_and_the_next_apply_converges(
    aws_system: System,
    aws_images: dict[str, str],
    moto: Moto,
    proxy: FaultProxy,
    rule: Rule,
    kind: str,
    signal: str,
) -> None:
    system = aws_system
    proxy.fault(rule)
    await cluster_on(system, aws_images, proxy, FAST)
    failed = await system.finished_job(NAME, "apply", 1, within=LONG)
    assert ended(failed) == "Failed", system.log(failed)
    proxy.heal()
    error = result_of(failed)["error"]
    assert (error["kind"], error["signal"]) == (kind, signal), system.log(failed)

    def shows_it(obj: Json) -> bool:
        run = (obj.get("status") or {}).get("lastRun") or {}
        return bool(run.get("job") == failed["metadata"]["name"])

    obj = await system.until(lambda: _if(shows_it, live(system)), "lastRun of the failure")
    run = obj["status"]["lastRun"]
    assert (run["errorKind"], run["signal"]) == (kind, signal)
    applied = condition(obj, "ApplyJobSucceeded")
    assert applied is not None
    assert applied["message"].startswith(f"{kind} ({signal}): ")
    failures = system.registry.get_sample_value(
        "captf_job_failures_total",
        {"kind": "TerraformCluster", "op": "apply", "reason": "JobFailed", "error_kind": kind},
    )
    assert failures == 1
    await converged(system, moto, 2)


async def _if(check: Any, reading: Any) -> Json | None:
    obj: Json = await reading
    return obj if check(obj) else None


async def test_throttles_the_provider_absorbs_are_no_failure(
    aws_system: System, aws_images: dict[str, str], moto: Moto, proxy: FaultProxy
) -> None:
    """The first three EC2 calls throttled, the provider's default retries: its own
    retries get past them, and the first apply succeeds."""
    system = aws_system
    proxy.fault(Rule(THROTTLED, service="ec2", times=3))
    await cluster_on(system, aws_images, proxy, {"availability_zones": ["us-east-1a"]})
    job = await converged(system, moto, 1)
    assert "error" not in result_of(job)
    assert [c.action for c in proxy.calls if c.faulted] != []
    assert sum(c.faulted for c in proxy.calls) == 3
    assert "failures" not in ((await live(system)).get("status") or {})


async def test_moto_gone_mid_apply_then_back_converges_on_the_next_apply(
    aws_system: System, aws_images: dict[str, str], moto: Moto, proxy: FaultProxy
) -> None:
    """The endpoint stops answering right after the VPC is created: the provider cannot
    wait for it, the apply fails on a refused connection and leaves the VPC tainted; with
    AWS back, the next apply replaces it (no approval: a half-made resource) and moto is
    left with the one VPC the state names."""
    system = aws_system
    proxy.down_after("CreateVpc")
    await cluster_on(system, aws_images, proxy, FAST)
    failed = await system.finished_job(NAME, "apply", 1, within=LONG)
    proxy.up()
    assert ended(failed) == "Failed", system.log(failed)
    error = result_of(failed)["error"]
    assert (error["kind"], error["signal"]) == ("cloud-unavailable", "net:connection-refused")
    [half_made] = vpcs(moto)
    job = await converged(system, moto, 2)
    assert half_made not in vpcs(moto)
    assert result_of(job)["outcome"] == "succeeded"


async def test_a_provider_retrying_forever_is_ended_by_the_deadline_and_counted(
    aws_system: System, aws_images: dict[str, str], moto: Moto, proxy: FaultProxy
) -> None:
    """Every EC2 call throttled and the provider's default 25 retries: it is still at it
    when the Job's deadline ends it; the failure counts (timeout), as the seed says."""
    system = aws_system
    proxy.fault(Rule(Fault(503, "RequestLimitExceeded"), service="ec2"))
    await cluster_on(
        system,
        aws_images,
        proxy,
        {"availability_zones": ["us-east-1a"]},
        jobs={"activeDeadlineSeconds": 60},
    )
    failed = await system.finished_job(NAME, "apply", 1, within=LONG)
    assert ended(failed) == "Failed"

    def counted(obj: Json) -> bool:
        status = obj.get("status") or {}
        return bool((status.get("lastRun") or {}).get("job") == failed["metadata"]["name"])

    obj = await system.until(lambda: _if(counted, live(system)), "the deadline kill counted")
    assert obj["status"]["lastRun"]["errorKind"] == "timeout"
    assert obj["status"]["failures"]["apply"]["count"] == 1
    [event] = [
        e
        for e in await events_of(system.kube, "JobDeadlineExceeded")
        if e["involvedObject"]["name"] == NAME
    ]
    assert failed["metadata"]["name"] in event["message"]
