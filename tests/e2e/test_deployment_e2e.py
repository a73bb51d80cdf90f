"""The controller as users run it: manifests/ installed on the local cluster, its
Deployment of two leader-elected replicas run by the process node under their own
ServiceAccount, the real Deployment and Job controllers, and the runner with real
OpenTofu.

Each test installs the controller (watching only the test's namespace, since the
control plane is shared by the session), checks what a user would see, and removes
the Deployment's pods before its node stops. Handover times are printed."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from controller.dev.install import (
    DEPLOYMENT,
    NAMESPACE,
    WEBHOOK_CONFIGURATIONS,
    LoopbackWebhook,
    apply,
    free_port,
    on_process_node,
    path_of,
)
from controller.dev.kustomize import render
from controller.dev.node import ProcessNode, default_images
from controller.dev.replicas import replica_of, scrape_sum
from controller.runner.binaries import runner_environ
from runtime.envtest import ApiServer, RequestFailed
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.kube.harness import Kube, condition, events_of, eventually

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
RUNNER_ACCOUNT = "captf-runner"
DEPLOYMENT_PATH = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{DEPLOYMENT}"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
LEASE_PATH = f"{LEASES}/{DEPLOYMENT}"
CONTROLLER_PODS = (
    f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app.kubernetes.io/component=controller"
)
# Python processes starting and syncing on a loaded 2-core machine, OpenTofu included.
WAIT = 120.0
# A crashed leader's Lease blocks for 15 s after its last renewal; the standby polls
# every 2 s to 4.4 s.
CRASH_HANDOVER = 20.0
QUICK = 'variable "size" {}\nresource "terraform_data" "x" { input = var.size }\n'
# An apply that runs long enough to kill the leader while it does.
SLOW = """variable "size" {}
resource "terraform_data" "slow" {
  input = var.size
  provisioner "local-exec" {
    command = "sleep 8"
  }
}
"""


@dataclass
class Stack:
    server: ApiServer
    kube: Kube

    async def get(self, path: str) -> Json:
        return await self.kube.call("GET", path)

    async def controller_pods(self) -> list[Json]:
        pods = await self.kube.call("GET", CONTROLLER_PODS)
        return [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]

    async def holder(self) -> str | None:
        """The leader's identity: its pod's name and a suffix new with every process."""
        lease = await self.get(LEASE_PATH)
        holder: str | None = lease["spec"].get("holderIdentity")
        return holder

    async def leader(self) -> str | None:
        """The leader's pod."""
        return replica_of(await self.holder())

    async def two_ready(self) -> Json:
        async def probe() -> Json | None:
            d = await self.get(DEPLOYMENT_PATH)
            status = d.get("status") or {}
            done = (
                status.get("observedGeneration") == d["metadata"]["generation"]
                and status.get("replicas") == status.get("updatedReplicas") == 2
                and status.get("readyReplicas") == 2
            )
            return d if done else None

        return await eventually(probe, within=WAIT, what="Deployment 2/2 Ready, up to date")

    async def applied(self, name: str) -> Json:
        async def probe() -> Json | None:
            ready = condition(await self.kube.cluster(name), "Ready")
            return ready if ready and ready.get("reason") == "Applied" else None

        return await eventually(probe, within=WAIT, what=f"{name} Ready: Applied")

    async def apply_pod_running(self) -> Json | None:
        path = f"/api/v1/namespaces/{self.kube.ns}/pods?labelSelector=captf.io/op=apply"
        pods = (await self.kube.call("GET", path))["items"]
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return running[0] if running else None

    async def apply_jobs(self, name: str) -> list[Json]:
        jobs = await self.kube.jobs("captf.io/op=apply")
        return [j for j in jobs if j["metadata"]["name"].startswith(f"{name}-apply-")]


@contextlib.asynccontextmanager
async def deployed(
    server: ApiServer,
    namespace: str,
    tofu: Path,
    tmp_path: Path,
    webhook: LoopbackWebhook | None = None,
) -> AsyncIterator[Stack]:
    port = free_port()
    install = on_process_node(
        render(MANIFESTS), metrics_port=port, time_scale=1, watch=namespace, webhook=webhook
    )
    # The CRDs are the session's (the `cluster` fixture installed them).
    install = [o for o in install if o["kind"] != "CustomResourceDefinition"]
    configurations = [o for o in install if o["kind"] in WEBHOOK_CONFIGURATIONS]
    for obj in configurations:
        # The session's other tests share the API server: review this namespace only.
        for hook in obj["webhooks"]:
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    # Nothing for the runner is applied in the namespace: the deployed controller, under
    # its manifests' RBAC, provides the account and its binding.
    apply(server, install)
    kube = Kube(server, namespace)
    stack = Stack(server, kube)
    async with open_transport(str(server.kubeconfig)) as transport:
        images = default_images(runner_environ(tofu))
        node = ProcessNode(
            transport, images=images, name="deployment-test", log_dir=tmp_path / "pod-logs"
        )
        async with node:
            try:
                yield stack
            finally:
                for obj in configurations:
                    await kube.call("DELETE", path_of(obj, named=True))
                await kube.call("DELETE", DEPLOYMENT_PATH, {"propagationPolicy": "Foreground"})

                async def gone() -> bool:
                    # Foreground: the Deployment goes last, after its ReplicaSets and pods,
                    # so the next install cannot land on one still being deleted.
                    try:
                        await kube.call("GET", DEPLOYMENT_PATH)
                    except RequestFailed as err:
                        return err.status == 404
                    return False

                await eventually(gone, within=WAIT, what="the Deployment and its pods gone")


async def _setup(stack: Stack, name: str, module: str) -> None:
    await stack.kube.setup_cluster(
        name, files={"main.tf": module}, jobs={"serviceAccountName": RUNNER_ACCOUNT}
    )


async def test_two_replicas_are_ready_and_a_rolling_update_creates_no_job_twice(
    cluster: ApiServer, cluster_namespace: str, tofu_build: Path, tmp_path: Path
) -> None:
    async with deployed(cluster, cluster_namespace, tofu_build, tmp_path) as stack:
        before = await stack.two_ready()
        leader = await eventually(stack.leader, within=WAIT, what="a leader")
        assert leader in {p["metadata"]["name"] for p in await stack.controller_pods()}
        await _setup(stack, "c1", QUICK)
        await stack.applied("c1")
        [job] = await stack.apply_jobs("c1")
        account = await stack.kube.call(
            "GET", f"/api/v1/namespaces/{cluster_namespace}/serviceaccounts/{RUNNER_ACCOUNT}"
        )
        assert account["metadata"]["labels"]["captf.io/runner-rbac"] == "managed"

        # Any change to the pod template rolls the Deployment: new replicas one at a
        # time, each Ready (as a standby) before an old one stops.
        patch = {"spec": {"template": {"metadata": {"annotations": {"test/rolled": "1"}}}}}
        await stack.kube.call("PATCH", DEPLOYMENT_PATH, patch, "application/merge-patch+json")
        after = await stack.two_ready()
        assert after["metadata"]["generation"] > before["metadata"]["generation"]
        replaced = {p["metadata"]["name"] for p in await stack.controller_pods()}
        assert leader not in replaced, "every replica was replaced, the leader too"
        new_leader = await eventually(stack.leader, within=WAIT, what="a leader")
        assert new_leader in replaced

        # The new leader found the Job accounted: no second Job, no second accounting.
        await stack.applied("c1")
        assert [j["metadata"]["uid"] for j in await stack.apply_jobs("c1")] == [
            job["metadata"]["uid"]
        ]
        applied = [e for e in await events_of(stack.kube, "Applied") if _about(e, job)]
        assert len(applied) == 1
        assert applied[0].get("count", 1) == 1


async def test_a_leader_killed_during_an_apply_leaves_one_job_and_one_accounting(
    cluster: ApiServer, cluster_namespace: str, tofu_build: Path, tmp_path: Path
) -> None:
    async with deployed(cluster, cluster_namespace, tofu_build, tmp_path) as stack:
        await stack.two_ready()
        await _setup(stack, "slow", SLOW)

        await eventually(stack.apply_pod_running, within=WAIT, what="the apply's pod running")
        killed = await stack.holder()
        leader = replica_of(killed)
        [pod] = [p for p in await stack.controller_pods() if p["metadata"]["name"] == leader]
        [container] = pod["status"]["containerStatuses"]
        pid = int(container["containerID"].removeprefix("process://"))
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()

        async def new_leader() -> str | None:
            # The other replica, or the killed one's container restarted by the node.
            now = await stack.holder()
            return now if now not in (None, killed) else None

        took_over = await eventually(new_leader, within=CRASH_HANDOVER + 10, what="a new leader")
        handover = time.monotonic() - killed_at
        print(f"handover after SIGKILL of the leader's process: {handover:.1f}s")
        assert handover <= CRASH_HANDOVER

        await stack.applied("slow")
        [job] = await stack.apply_jobs("slow")
        applied = [e for e in await events_of(stack.kube, "Applied") if _about(e, job)]
        assert len(applied) == 1
        assert applied[0].get("count", 1) == 1

        async def one_sample() -> float | None:
            pods = await stack.controller_pods()
            family, sample = "captf_job_attempts", "captf_job_attempts_count"
            seen = await anyio.to_thread.run_sync(scrape_sum, pods, family, sample)
            return seen or None

        assert await eventually(one_sample, within=30, what="the Job's metric sample") == 1
        assert took_over != killed


async def test_both_replicas_answer_the_webhook_on_one_loopback_port(
    cluster: ApiServer, cluster_namespace: str, tofu_build: Path, tmp_path: Path
) -> None:
    """The local install of the webhooks (`make run`'s): the Secret the install made
    mounted into both replicas, the configurations calling 127.0.0.1 with its certificate.
    Either replica answers: with one killed, the other keeps refusing bad objects."""
    webhook = LoopbackWebhook.make(free_port())
    async with deployed(cluster, cluster_namespace, tofu_build, tmp_path, webhook) as stack:
        await stack.two_ready()
        clusters = stack.kube.captf_path("terraformclusters")
        bad = {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "TerraformCluster",
            "metadata": {"name": "bad"},
            "spec": {
                "source": {"image": "Not/A Reference"},
                "identityRef": {"kind": "Secret", "name": "creds"},
                "jobs": {"image": "captf:dev"},
            },
        }

        seen: list[str] = []

        async def refused_by_the_webhook() -> str | None:
            try:
                await stack.kube.call("POST", clusters + "?dryRun=All", bad)
            except RequestFailed as error:
                seen.append(str(error))
                return str(error) if "denied the request" in str(error) else None
            return None

        refused = await eventually(
            refused_by_the_webhook, within=WAIT, what="the webhook's refusal"
        )
        assert "spec.source.image" in refused
        [pod, *_] = await stack.controller_pods()
        [container] = pod["status"]["containerStatuses"]
        os.kill(int(container["containerID"].removeprefix("process://")), signal.SIGKILL)
        # A connection the API server kept open to the killed replica is reset once (as
        # with a pod behind a Service); every new one reaches the living replica.
        seen.clear()
        answers = [await refused_by_the_webhook() for _ in range(12)]
        resets = [e for e in seen if "denied the request" not in e]
        assert all("connection reset" in e or "EOF" in e for e in resets), resets
        assert len(resets) <= 2, resets
        assert all(answers[-8:]), seen


def _about(event: Json, job: Json) -> bool:
    name = job["metadata"]["name"]
    return bool(
        event["metadata"]["name"].startswith(f"{name}.") or name in event.get("message", "")
    )
