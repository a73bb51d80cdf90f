"""The process node on a real control plane: kube-apiserver with kube-controller-manager.

Pods come from the real Job and ReplicaSet controllers (or are created directly), the
node binds and runs them as local Python processes (image `python` maps to this
interpreter), and every Job status is the Job controller's. Waits poll the API with a
deadline; none is a fixed sleep."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio

from controller.dev.node import ProcessNode, drain
from controller.dev.node.images import Image, ImageTable
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.transport import Transport, open_transport
from tests.kube.harness import eventually

pytestmark = pytest.mark.kube


WAIT = 60.0
IMAGES = ImageTable({"python": Image("python", (sys.executable,))})

# Records SIGTERM in $MARK; with IGNORE set it keeps running, else exits 143.
TRAP = """
import os, pathlib, signal, sys, time
def _term(*_):
    pathlib.Path(os.environ["MARK"]).write_text("SIGTERM")
    if not os.environ.get("IGNORE"):
        sys.exit(143)
signal.signal(signal.SIGTERM, _term)
pathlib.Path(os.environ["PIDFILE"]).write_text(str(os.getpid()))
"""
SLEEP = TRAP + "time.sleep(600)\n"
DUMP_ENV = """
import json, os, pathlib
pathlib.Path(os.environ["OUT"]).write_text(json.dumps(dict(os.environ)))
"""

# Calls the API server as the pod's ServiceAccount, through what the node provides, and
# writes the answer's status and message: the identity the server saw.
WHOAMI = """
import json, os, pathlib, ssl, urllib.request, urllib.error
sa = pathlib.Path(os.environ["CAPTF_SERVICE_ACCOUNT_DIR"])
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
ns = (sa / "namespace").read_text()
req = urllib.request.Request(
    f"https://{host}:{port}/api/v1/namespaces/{ns}/secrets",
    headers={"Authorization": "Bearer " + (sa / "token").read_text()},
)
ctx = ssl.create_default_context(cafile=str(sa / "ca.crt"))
try:
    urllib.request.urlopen(req, context=ctx)
    answer = "200"
except urllib.error.HTTPError as err:
    answer = f"{err.code} {json.loads(err.read())['message']}"
pathlib.Path(os.environ["OUT"]).write_text(answer)
"""


class Node:
    """The node under test (run it with `async with n.node`), the admin's transport and
    the namespace."""

    def __init__(self, transport: Transport, ns: str, tmp_path: Path) -> None:
        self.transport = transport
        self.ns = ns
        self.node = ProcessNode(
            transport,
            images=IMAGES,
            name=f"node-{ns}"[:63],
            namespace=ns,
            log_dir=tmp_path / "logs",
            pods_dir=tmp_path / "pods",
        )

    async def create(self, plural: str, body: Json, group: str = "") -> Json:
        base = f"/apis/{group}" if group else "/api/v1"
        return await self.transport.request(
            "POST", f"{base}/namespaces/{self.ns}/{plural}", body=body
        )

    async def job(self, name: str) -> Json:
        return await self.transport.request(
            "GET", f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}"
        )

    async def pods(self, selector: str) -> list[Json]:
        listed = await self.transport.request(
            "GET", f"/api/v1/namespaces/{self.ns}/pods", params={"labelSelector": selector}
        )
        items: list[Json] = listed.get("items") or []
        return items

    async def job_ended(self, name: str, kind: str) -> Json:
        async def probe() -> Json | None:
            job = await self.job(name)
            return job if _condition(job, kind) else None

        return await eventually(probe, within=WAIT, what=f"Job {name} {kind}")

    async def pod_of(self, job: str, phase: str | None = None) -> Json:
        async def probe() -> Json | None:
            for pod in await self.pods(f"job-name={job}"):
                if phase is None or (pod.get("status") or {}).get("phase") == phase:
                    return pod
            return None

        return await eventually(probe, within=WAIT, what=f"a pod of {job} in {phase}")


@pytest_asyncio.fixture(loop_scope="function")
async def n(cluster: ApiServer, cluster_namespace: str, tmp_path: Path) -> AsyncIterator[Node]:
    async with open_transport(str(cluster.kubeconfig)) as transport:
        yield Node(transport, cluster_namespace, tmp_path)


def job_body(name: str, script: str, *, env: list[Json] | None = None, **spec: Any) -> Json:
    return {
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "podFailurePolicy": {
                "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]
            },
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "main",
                            "image": "python:3",
                            "args": ["-c", script],
                            "env": env or [],
                        }
                    ],
                }
            },
        }
        | spec,
    }


def _condition(obj: Json, kind: str) -> Json | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            found: Json = cond
            return found
    return None


def _terminated(pod: Json) -> Json:
    state: Json = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


def files(tmp_path: Path, *names: str) -> list[Json]:
    return [{"name": n.upper(), "value": str(tmp_path / n)} for n in names]


async def test_a_job_runs_and_completes_with_the_environment_and_status_a_kubelet_gives(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        await n.create("secrets", {"metadata": {"name": "s"}, "stringData": {"TOKEN": "t0k"}})
        await n.create("configmaps", {"metadata": {"name": "c"}, "data": {"MODE": "fast"}})
        script = DUMP_ENV
        env: list[Json] = [
            # A container path: the emptyDir mounted at /tmp is where it lands.
            {"name": "OUT", "value": "/tmp/env.json"},
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "TOKEN"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "REF", "value": "$(MODE)-$(KEY)"},
        ]
        body = job_body("ok", script, env=env)
        pod_spec = body["spec"]["template"]["spec"]
        pod_spec["volumes"] = [{"name": "tmp", "emptyDir": {}}]
        container = pod_spec["containers"][0]
        container["envFrom"] = [{"configMapRef": {"name": "c"}}]
        container["volumeMounts"] = [{"name": "tmp", "mountPath": "/tmp"}]
        container["env"].append({"name": "WORK", "value": "/tmp/work"})
        await n.create("jobs", body, group="batch/v1")

        job = await n.job_ended("ok", "Complete")
        assert _condition(job, "SuccessCriteriaMet")
        assert job["status"]["succeeded"] == 1
        assert job["status"]["startTime"]
        pod = await n.pod_of("ok", "Succeeded")
        meta = pod["metadata"]
        volume = tmp_path / "pods" / meta["uid"] / "v"
        seen = json.loads((volume / "tmp" / "env.json").read_text())
        assert seen["KEY"] == "t0k"
        assert seen["MODE"] == "fast"
        assert seen["REF"] == "fast-t0k"
        assert seen["POD"] == pod["metadata"]["name"]
        assert seen["IP"] == pod["status"]["podIP"]
        assert seen["HOSTNAME"] == pod["metadata"]["name"]
        # /tmp is the pod's emptyDir; the node's own paths (under /tmp here) are left alone.
        assert seen["WORK"] == str(volume / "tmp" / "work")
        assert seen["TMPDIR"] == str(volume / "tmp")
        assert (Path(seen["CAPTF_SERVICE_ACCOUNT_DIR"]) / "token").is_file()
        assert "KUBECONFIG" not in seen
        assert seen["HOME"] != os.environ.get("HOME")
        assert pod["spec"]["nodeName"] == n.node.name
        terminated = _terminated(pod)
        assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
        assert pod["status"]["startTime"]
        assert pod["status"]["hostIP"] == "127.0.0.1"
        kinds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert kinds["PodScheduled"] == "True"
        assert kinds["PodReadyToStartContainers"] == "False"  # the sandbox is gone once it ended
        assert kinds["Ready"] == "False"
        assert kinds["Initialized"] == "True"
        # The Job controller removed its tracking finalizer: the pod is settled.
        assert "batch.kubernetes.io/job-tracking" not in (pod["metadata"].get("finalizers") or [])


async def test_a_non_zero_exit_fails_the_job_by_its_backoff_limit(n: Node) -> None:
    async with n.node:
        await n.create("jobs", job_body("bad", "raise SystemExit(3)"), group="batch/v1")
        job = await n.job_ended("bad", "Failed")
        assert _condition(job, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
        assert job["status"]["failed"] == 1
        terminated = _terminated(await n.pod_of("bad", "Failed"))
        assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")


async def test_a_termination_message_reaches_the_pod_status_capped_as_a_kubelet_caps_it(
    n: Node,
) -> None:
    # The container names the path as a pod would (here through env); the node maps it to
    # a file of the container's own, as it maps a volume's mount path.
    write = (
        "import os; open(os.environ['MSG'], 'w').write(os.environ['TEXT']);"
        " raise SystemExit(int(os.environ['CODE']))"
    )
    async with n.node:
        env = [
            {"name": "MSG", "value": "/dev/termination-log"},
            {"name": "TEXT", "value": "done: ok"},
            {"name": "CODE", "value": "0"},
        ]
        await n.create("jobs", job_body("said", write, env=env), group="batch/v1")
        await n.job_ended("said", "Complete")
        assert _terminated(await n.pod_of("said", "Succeeded"))["message"] == "done: ok"

        body = job_body(
            "long",
            write,
            env=[
                {"name": "MSG", "value": "/var/run/result"},
                {"name": "TEXT", "value": "x" * 5000},
                {"name": "CODE", "value": "2"},
            ],
        )
        container = body["spec"]["template"]["spec"]["containers"][0]
        container["terminationMessagePath"] = "/var/run/result"
        container["terminationMessagePolicy"] = "File"
        await n.create("jobs", body, group="batch/v1")
        await n.job_ended("long", "Failed")
        terminated = _terminated(await n.pod_of("long", "Failed"))
        assert (terminated["exitCode"], terminated["message"]) == (2, "x" * 4096)

        await n.create("jobs", job_body("silent", "pass"), group="batch/v1")
        await n.job_ended("silent", "Complete")
        assert "message" not in _terminated(await n.pod_of("silent", "Succeeded"))


async def test_each_pod_calls_the_api_server_as_its_own_service_account(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        await n.create("serviceaccounts", {"metadata": {"name": "reader"}})
        body = job_body("who", WHOAMI, env=files(tmp_path, "out"))
        body["spec"]["template"]["spec"]["serviceAccountName"] = "reader"
        await n.create("jobs", body, group="batch/v1")
        await n.job_ended("who", "Complete")
        answer = (tmp_path / "out").read_text()
        # Authenticated by its token, and refused by RBAC: reader has no Role.
        assert answer.startswith("403"), answer
        assert f"system:serviceaccount:{n.ns}:reader" in answer


async def test_a_job_past_its_deadline_is_failed_by_the_job_controller_and_its_pod_stopped(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        env = files(tmp_path, "mark", "pidfile")
        await n.create(
            "jobs", job_body("slow", SLEEP, env=env, activeDeadlineSeconds=2), "batch/v1"
        )
        job = await n.job_ended("slow", "Failed")
        assert _condition(job, "Failed")["reason"] == "DeadlineExceeded"  # type: ignore[index]
        assert (tmp_path / "mark").read_text() == "SIGTERM"
        _gone(int((tmp_path / "pidfile").read_text()))


async def test_an_evicted_pod_fails_its_job_by_the_pod_failure_policy(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        env = files(tmp_path, "mark", "pidfile")
        await n.create("jobs", job_body("evicted", SLEEP, env=env), group="batch/v1")
        await n.pod_of("evicted", "Running")
        await eventually(lambda: _exists(tmp_path / "pidfile"), within=WAIT, what="the process")
        evicted = await drain(
            n.transport, n.node.name, LoopClock(), namespace=n.ns, label_selector="job-name=evicted"
        )
        assert len(evicted) == 1
        job = await n.job_ended("evicted", "Failed")
        assert _condition(job, "Failed")["reason"] == "PodFailurePolicy"  # type: ignore[index]
        assert (tmp_path / "mark").read_text() == "SIGTERM"
        node = await n.transport.request("GET", f"/api/v1/nodes/{n.node.name}")
        assert node["spec"]["unschedulable"] is True


async def test_deleting_a_pod_sends_sigterm_then_sigkill_after_its_grace_then_removes_it(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        env = [*files(tmp_path, "mark", "pidfile"), {"name": "IGNORE", "value": "1"}]
        pod = {
            "metadata": {"name": "stubborn"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {"name": "main", "image": "python", "args": ["-c", SLEEP], "env": env}
                ],
            },
        }
        await n.create("pods", pod)
        await eventually(lambda: _exists(tmp_path / "pidfile"), within=WAIT, what="the process")
        pid = int((tmp_path / "pidfile").read_text())
        await n.transport.request("DELETE", f"/api/v1/namespaces/{n.ns}/pods/stubborn")

        async def removed() -> bool:
            try:
                await n.transport.request("GET", f"/api/v1/namespaces/{n.ns}/pods/stubborn")
            except ApiError as exc:
                return exc.status == 404
            return False

        await eventually(removed, within=WAIT, what="the pod removed")
        assert (tmp_path / "mark").read_text() == "SIGTERM"
        _gone(pid)


async def test_a_readiness_probe_makes_the_pod_ready_and_pods_listen_on_their_own_ip(
    n: Node,
) -> None:
    async with n.node:
        server = (
            "import http.server, os\n"
            "http.server.HTTPServer((os.environ['IP'], 8080), http.server.SimpleHTTPRequestHandler)"
            ".serve_forever()\n"
        )
        deployment = {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "containers": [
                            {
                                "name": "web",
                                "image": "python",
                                "args": ["-c", server],
                                "env": [
                                    {
                                        "name": "IP",
                                        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                                    }
                                ],
                                "ports": [{"name": "http", "containerPort": 8080}],
                                "readinessProbe": {
                                    "httpGet": {"path": "/", "port": "http"},
                                    "periodSeconds": 1,
                                },
                            }
                        ],
                    },
                },
            },
        }
        await n.create("deployments", deployment, group="apps/v1")

        async def available() -> Json | None:
            got = await n.transport.request(
                "GET", f"/apis/apps/v1/namespaces/{n.ns}/deployments/web"
            )
            return got if (got.get("status") or {}).get("readyReplicas") == 2 else None

        await eventually(available, within=WAIT, what="2 ready replicas")
        pods = await n.pods("app=web")
        assert len({p["status"]["podIP"] for p in pods}) == 2
        assert all(_condition(p, "Ready") for p in pods)


async def test_a_container_that_exits_under_restart_policy_always_is_restarted(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        pod = {
            "metadata": {"name": "crashy"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {"name": "main", "image": "python", "args": ["-c", "raise SystemExit(1)"]}
                ],
            },
        }
        await n.create("pods", pod)

        async def restarted() -> Json | None:
            got = await n.transport.request("GET", f"/api/v1/namespaces/{n.ns}/pods/crashy")
            statuses = (got.get("status") or {}).get("containerStatuses") or [{}]
            return got if statuses[0].get("restartCount", 0) >= 1 else None

        got = await eventually(restarted, within=WAIT, what="a restart")
        status = got["status"]["containerStatuses"][0]
        assert status["lastState"]["terminated"]["exitCode"] == 1
        assert got["status"]["phase"] == "Running"


async def _exists(path: Path) -> bool:
    return await anyio.Path(path).exists() and bool(await anyio.Path(path).read_text())


def _gone(pid: int) -> None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    # A zombie is gone for our purposes: it cannot run.
    state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert state == "Z", f"process {pid} still runs"


async def test_an_ended_pods_directory_and_token_go_when_the_pod_is_deleted(
    n: Node, tmp_path: Path
) -> None:
    async with n.node:
        await n.create("jobs", job_body("done", "pass"), group="batch/v1")
        await n.job_ended("done", "Complete")
        pod = await n.pod_of("done", "Succeeded")
        directory = tmp_path / "pods" / pod["metadata"]["uid"]
        assert list(directory.rglob("token")), "the pod had its token"
        path = f"/api/v1/namespaces/{n.ns}/pods/{pod['metadata']['name']}"
        await n.transport.request("DELETE", path)

        async def removed() -> bool:
            return not await anyio.Path(directory).exists()

        await eventually(removed, within=WAIT, what="the pod's directory removed")


async def test_a_node_shutdown_stops_its_pods_and_marks_them_as_a_kubelet_does(
    n: Node, tmp_path: Path
) -> None:
    env = files(tmp_path, "mark", "pidfile")
    async with n.node:
        await n.create("jobs", job_body("cut", SLEEP, env=env), group="batch/v1")
        await eventually(lambda: _exists(tmp_path / "pidfile"), within=WAIT, what="the process")
    # The node's block has ended: its pods were stopped before it returned.
    assert (tmp_path / "mark").read_text() == "SIGTERM"
    _gone(int((tmp_path / "pidfile").read_text()))
    pod = await n.pod_of("cut", "Failed")
    assert pod["status"]["reason"] == "Terminated"
    disruption = _condition(pod, "DisruptionTarget")
    assert disruption is not None
    assert disruption["reason"] == "TerminationByKubelet"
    # The Job controller sees a disruption: the pod failure policy fails the Job.
    job = await n.job_ended("cut", "Failed")
    assert _condition(job, "Failed")["reason"] == "PodFailurePolicy"  # type: ignore[index]
