"""`captf get`, `approve`, `plan show` and `restore` on the real API server, with the
controller running: what they print and what they change is what the controller
then acts on."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson
import pytest
import yaml

from controller.cli.main import main
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from tests.kube.harness import (
    Kube,
    controller_on,
    eventually,
    job_env,
    new_job,
    next_is,
    nth_job,
    plan_is,
    state_of,
    write_plan,
)

pytestmark = pytest.mark.kube
CLUSTERS = "terraformclusters"
TOFU_ERROR = (
    "tofu apply failed (exit 1):\nError: local-exec provisioner error\n\n"
    "  with terraform_data.flaky,\nsimulated cloud API error: throttled (attempt 1)\n"
)


async def captf(
    capsys: pytest.CaptureFixture[str], server: ApiServer, ns: str, *argv: str
) -> tuple[int, str, str]:
    """One `captf` command, in a thread as a person's shell would run it beside the
    controller; its exit status, stdout and stderr."""
    capsys.readouterr()
    args = [*argv, "-n", ns, "--kubeconfig", str(server.kubeconfig)]
    status = await asyncio.to_thread(main, args)
    out, err = capsys.readouterr()
    return status, out, err


async def test_get_shows_the_wait_the_attempts_and_the_cause(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with controller_on(apiserver, namespace, guard={"allowDestructive": True}) as (
        kube,
        clock,
    ):
        first = await nth_job(kube, 1)
        await kube.finish(first, "failed", at=clock.now(), result={"message": TOFU_ERROR})
        nxt = await next_is(kube, "InputsChangedBackoff")

        status, out, _ = await captf(capsys, apiserver, namespace, "get", "-o", "json")
        assert status == 0
        [row] = orjson.loads(out)["items"]
        assert row | {"retryInSeconds": None} == {
            "kind": "TerraformCluster",
            "namespace": namespace,
            "name": "c1",
            "cluster": "c1",
            "machine": None,
            "ready": "False",
            "op": "apply",
            "reason": "InputsChangedBackoff",
            "retryAt": nxt["at"],
            "retryInSeconds": None,
            "attempts": 1,
            "lastError": f"Job {first['metadata']['name']} failed: {TOFU_ERROR}",
            "source": "configmap/c1-module",
            "image": None,
            "health": None,  # a machine's HealthWatched; a cluster has none
            "changes": None,  # the newest run's plan: this one failed before one
            "policy": None,  # no policy judged it
            "lastRun": {
                "job": first["metadata"]["name"],
                "op": "apply",
                "result": "failed",
                "finishedAt": row["lastRun"]["finishedAt"],
            },
        }

        status, out, _ = await captf(capsys, apiserver, namespace, "get", "tfc")
        header, line = out.splitlines()
        assert header.split()[:6] == ["NAME", "CLUSTER", "MACHINE", "READY", "OP", "REASON"]
        assert line.split()[:7] == [
            "c1",
            "c1",
            "-",
            "False",
            "apply",
            "InputsChangedBackoff",
            nxt["at"][11:19],
        ]
        assert line.endswith("simulated cloud API error: throttled (attempt 1)")

        status, out, _ = await captf(capsys, apiserver, namespace, "get", "-o", "yaml")
        assert yaml.safe_load(out)["items"][0]["attempts"] == 1

        # A Job running: its op and its retry number.
        await clock.advance(60)
        second = await new_job(kube, first)
        await next_is(kube, "JobRunning")
        status, out, _ = await captf(capsys, apiserver, namespace, "get", "-o", "json")
        [row] = orjson.loads(out)["items"]
        assert (row["op"], row["attempts"]) == ("apply", 2)
        assert second["metadata"]["annotations"]["captf.io/retry"] == "2"


async def test_get_refuses_an_unknown_kind(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = await captf(capsys, apiserver, namespace, "get", "pods")
    assert status == 2
    assert err.startswith("captf get: 'pods' is not a CAPTF kind")


async def test_approve_approves_exactly_the_waiting_plan(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with controller_on(apiserver, namespace) as (kube, clock):
        blocked = await nth_job(kube, 1)
        name = blocked["metadata"]["name"]

        # Running, not waiting: refused, saying what the controller does instead.
        await next_is(kube, "JobRunning")
        status, _, err = await captf(capsys, apiserver, namespace, "approve", "tfc/c1")
        assert status == 1
        assert "nothing of TerraformCluster/c1 waits for approval (JobRunning" in err

        await _stop_on_plan(kube, blocked, clock.now(), "blocked")
        await plan_is(kube, name, "Pending")
        status, out, _ = await captf(capsys, apiserver, namespace, "approve", "tfc/c1")
        assert status == 0
        assert out == (
            f"TerraformCluster/c1: approved TerraformPlan {name} "
            "(1 to create, 0 to update, 0 to replace, 0 to delete)\n"
        )
        assert (await kube.get("terraformplans", name))["spec"]["approved"] is True
        assert "captf.io/approve" not in _notes(await kube.cluster())

        # The controller acts on it: the approved apply runs unguarded.
        approved = await new_job(kube, blocked)
        assert job_env(approved)["CAPTF_GUARDED"] == "false"
        await plan_is(kube, name, "Approved")

        status, _, err = await captf(capsys, apiserver, namespace, "approve", "tfc/c1")
        assert status == 1
        assert f"TerraformPlan {name} is approved and its apply is due" in err


async def test_plan_show_prints_the_waiting_plan(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with controller_on(apiserver, namespace, approval={"mode": "Manual"}) as (kube, clock):
        plan = await nth_job(kube, 1, "captf.io/op=plan")
        name = plan["metadata"]["name"]
        await _stop_on_plan(kube, plan, clock.now(), "succeeded")
        await plan_is(kube, name, "Pending")

        for ref in ("tfc/c1", name):
            status, out, _ = await captf(capsys, apiserver, namespace, "plan", "show", ref)
            assert status == 0
            lines = out.splitlines()
            assert lines[:4] == [
                f"TerraformPlan {name} of TerraformCluster/c1",
                "Phase:        Pending",
                "Approved:     no",
                "Approved by:  -",
            ]
            assert "Changes:      1 to create, 0 to update, 0 to replace, 0 to delete" in lines
            assert "  create  terraform_data.x" in lines
            # The admin may read the plan Secret: its values follow, as tofu shows them.
            assert "  + create  terraform_data.x" in lines
            assert "      input: null -> 1" in lines
            assert lines[-1] == "To approve it: captf approve TerraformCluster/c1"

        status, _, _ = await captf(capsys, apiserver, namespace, "approve", "tfc/c1")
        assert status == 0
        apply = await nth_job(kube, 1)
        assert job_env(apply)["CAPTF_APPROVED_PLAN_SECRET"] == job_env(plan)["CAPTF_PLAN_SECRET"]
        await plan_is(kube, name, "Approved")
        status, out, _ = await captf(capsys, apiserver, namespace, "plan", "show", name)
        assert "Phase:        Approved" in out.splitlines()
        assert "To approve it" not in out


async def _stop_on_plan(kube: Kube, job: Json, at: Any, outcome: str) -> None:
    """Plays a runner that keeps its plan: the plan Secret with its summary, then the result."""
    secret = job_env(job)["CAPTF_PLAN_SECRET"]
    shown = {
        "resource_changes": [
            {
                "address": "terraform_data.x",
                "change": {"actions": ["create"], "before": None, "after": {"input": 1}},
            }
        ]
    }
    summary = {
        "fingerprint": "sha256:0a",
        "counts": {"create": 1, "update": 0, "replace": 0, "delete": 0},
        "resources": [{"address": "terraform_data.x", "action": "create"}],
    }
    data = {"plan.json": base64.b64encode(orjson.dumps(shown)).decode(), "tfplan": "AA=="}
    await write_plan(kube, secret, data, summary=summary)
    await kube.finish(job, outcome, at=at, result={"planSecret": secret})


async def test_restore_asks_only_for_a_backup_that_exists(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = Kube(apiserver, namespace)
    await kube.setup_cluster()
    backup = {
        "metadata": {
            "name": f"{state_of(kube)}-3",
            "labels": {
                "captf.io/state-backup-of": "c1",
                "captf.io/kind": "TerraformCluster",
                "captf.io/name": "c1",
            },
            "annotations": {"captf.io/serial": "3"},
        },
        "stringData": {"terraform.tfstate": "{}"},
    }
    await kube.call("POST", f"/api/v1/namespaces/{namespace}/secrets", backup)

    status, _, err = await captf(capsys, apiserver, namespace, "restore", "tfc/c1", "--serial", "9")
    assert status == 1
    assert "has no state backup of serial 9 (backups: 3)" in err
    assert "captf.io/restore-serial" not in _notes(await kube.cluster())

    status, out, _ = await captf(capsys, apiserver, namespace, "restore", "tfc/c1", "--serial", "3")
    assert status == 0
    assert f"restore of state serial 3 ({state_of(kube)}-3) requested" in out
    assert _notes(await kube.cluster())["captf.io/restore-serial"] == "3"

    status, _, err = await captf(
        capsys, apiserver, namespace, "restore", "tfc/nope", "--serial", "3"
    )
    assert status == 1
    assert "NotFound" in err or "not found" in err


def _notes(obj: Json) -> dict[str, str]:
    notes: dict[str, str] = obj["metadata"].get("annotations") or {}
    return notes


async def test_get_all_namespaces_has_a_namespace_column(
    apiserver: ApiServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await Kube(apiserver, namespace).setup_cluster("lonely")

    async def listed() -> str | None:
        status, out, _ = await captf(capsys, apiserver, namespace, "get", "-A")
        return out if status == 0 and f"{namespace} " in out else None

    out = await eventually(listed, what="the object in `captf get -A`")
    assert out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    [line] = [line for line in out.splitlines() if line.startswith(namespace)]
    assert line.split()[1:5] == ["terraformcluster/lonely", "lonely", "-", "Unknown"]
