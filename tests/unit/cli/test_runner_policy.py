"""The operator's runner policy: which images and service accounts an object's Jobs may
use, the flag named when one is refused, and the account Jobs run as by default."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from controller.cli.main import main
from controller.core.spec.policy import OPEN, PolicyError, RunnerPolicy, read_policy

DEFAULT = RunnerPolicy()
TEAM = RunnerPolicy(
    images=("registry.example.com/captf:*", "captf:dev"),
    service_accounts=("captf-runner", "team-*"),
)


@pytest.mark.parametrize(
    ("runner", "jobs", "account"),
    [
        (DEFAULT, {"image": "captf:dev"}, "captf-runner"),
        (DEFAULT, {"image": "captf:dev", "serviceAccountName": "captf-runner"}, "captf-runner"),
        (TEAM, {"image": "registry.example.com/captf:stable"}, "captf-runner"),
        (TEAM, {"image": "captf:dev", "serviceAccountName": "team-a"}, "team-a"),
        (OPEN, {"image": "anything:1", "serviceAccountName": "whoever"}, "whoever"),
        (OPEN, {"image": "anything:1"}, None),  # the namespace's default account
        (RunnerPolicy(service_accounts=("runner-*",)), {"image": "captf:dev"}, None),
    ],
)
def test_allowed_runners(runner: RunnerPolicy, jobs: dict[str, str], account: str | None) -> None:
    assert read_policy({"jobs": jobs}, runner).service_account == account


@pytest.mark.parametrize(
    ("runner", "jobs", "message"),
    [
        (
            DEFAULT,
            {"image": "evil.example/miner:1"},
            "spec.jobs.image 'evil.example/miner:1' is not allowed by the controller's "
            "--allowed-images=captf:dev",
        ),
        (
            TEAM,
            {"image": "registry.example.com/other:1"},
            "--allowed-images=registry.example.com/captf:*,captf:dev",
        ),
        (
            DEFAULT,
            {"image": "captf:dev", "serviceAccountName": "cluster-admin"},
            "spec.jobs.serviceAccountName 'cluster-admin' is not allowed by the controller's "
            "--allowed-service-accounts=captf-runner",
        ),
        (TEAM, {"image": "captf:dev", "serviceAccountName": "teams"}, "team-*"),
    ],
)
def test_refused_runners_name_the_flag(
    runner: RunnerPolicy, jobs: dict[str, str], message: str
) -> None:
    with pytest.raises(PolicyError, match="not allowed") as info:
        read_policy({"jobs": jobs}, runner)
    assert message in str(info.value)


SNAPSHOT = """\
now: 2026-06-01T12:00:00Z
objects:
- apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
  kind: TerraformCluster
  metadata:
    name: c1
    namespace: ns
    uid: u1
    ownerReferences: [{apiVersion: cluster.x-k8s.io/v1beta2, kind: Cluster, name: c1}]
  spec:
    source: {configMapRef: {name: mod}}
    jobs: {image: registry.example.com/captf:stable}
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: Cluster
  metadata: {name: c1, namespace: ns}
  spec: {infrastructureRef: {kind: TerraformCluster, name: c1}}
- kind: ConfigMap
  metadata: {name: mod, namespace: ns}
  data: {main.tf: ""}
"""


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        ([], "JobPolicyInvalid"),
        (["--allowed-images", "registry.example.com/captf:*"], "InputsChanged"),
        (
            ["--allowed-images", "*", "--allowed-service-accounts", "nobody"],
            "InputsChanged",
        ),
    ],
)
def test_decide_takes_the_controllers_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], reason: str
) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(SNAPSHOT)
    assert main(["decide", "-f", str(path), "-v", *flags]) == 0
    decided = orjson.loads(capsys.readouterr().out)
    assert decided["reason"] == reason
    if reason == "JobPolicyInvalid":
        assert "--allowed-images=captf:dev" in decided["message"]
