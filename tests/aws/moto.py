"""moto's server as AWS on loopback: a process of its own per use (moto keeps its state
per process, so two servers in one process would share it), boto3 clients to look
behind the provider's back, and what is left of a cluster once it is deleted."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

REGION = "us-east-1"
# moto accepts any keys; these are the ones its documentation uses.
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
# An image moto serves in every region (its default Ubuntu 16.04 image).
AMI = "ami-785db401"


@dataclass(frozen=True)
class Moto:
    url: str
    log: Path

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
        )


def credentials(endpoint: str) -> dict[str, str]:
    """What the identity's Secret holds for the runner to reach `endpoint` as AWS: the
    provider reads every one from its environment."""
    return KEYS | {
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def moto_server(log: Path) -> Iterator[Moto]:
    """moto's server in a process of its own, until the block ends."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            _wait_ready(url, proc)
            yield Moto(url, log)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto's server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"moto's server at {url} did not answer within 60 s")


def leftovers(moto: Moto) -> dict[str, list[str]]:
    """What a deleted cluster must not leave: VPCs other than the default, instances not
    terminated, load balancers, target groups, Auto Scaling groups, launch templates."""
    ec2 = moto.client("ec2")
    elb = moto.client("elbv2")
    scaling = moto.client("autoscaling")
    vpcs = [v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")]
    live = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running", "stopped"]}]
    )
    return {
        "vpcs": vpcs,
        "instances": [i["InstanceId"] for r in live["Reservations"] for i in r["Instances"]],
        "load_balancers": [
            lb["LoadBalancerName"] for lb in elb.describe_load_balancers()["LoadBalancers"]
        ],
        "target_groups": [
            tg["TargetGroupName"] for tg in elb.describe_target_groups()["TargetGroups"]
        ],
        "groups": [
            g["AutoScalingGroupName"]
            for g in scaling.describe_auto_scaling_groups()["AutoScalingGroups"]
        ],
        "launch_templates": [
            t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]
        ],
    }
