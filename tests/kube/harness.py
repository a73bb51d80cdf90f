"""Running the controller in-process against the real API server, and playing Job outcomes.

No Job controller or kubelet runs beside the test API server, so tests write a
finished Job's status themselves, the way the Job controller would, through
the status subresource. The runner's result is played either on the Job itself, as
the controller records it (`finish`), or where a runner leaves it, in its pod's
termination message for the controller to find (`finish_in_pod`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import orjson
import yaml
from prometheus_client import CollectorRegistry

from controller.core.basics.names import (
    ANN_PLAN_SUMMARY,
    ANN_RESULT,
    CAPI_API_VERSION,
    CLUSTER,
    GROUP,
    LABEL_CLUSTER_NAME,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_PLAN_OF,
    MANAGED_BY,
    PLURALS,
    POOL,
    VERSION,
    legacy_state_secret_name,
    state_secret_name,
)
from controller.core.basics.timefmt import format_time
from controller.io.config import ControllerConfig
from controller.io.main import serve
from controller.runner.state_layout import read_body
from runtime.clock import Clock, SteppedClock
from runtime.envtest import ApiServer, RequestFailed
from runtime.jsonobj import Json
from tests.builders import ROLE_MODULE

T = TypeVar("T")
MERGE = "application/merge-patch+json"
RUNNER_ROLE = Path(__file__).resolve().parents[2] / "manifests" / "runner-rbac.yaml"
MODULE = {"main.tf": 'variable "size" {}\nresource "terraform_data" "x" { input = var.size }\n'}


class Kube:
    """Async calls to the test API server (the sync client, off the event loop)."""

    def __init__(self, server: ApiServer, namespace: str) -> None:
        self.server = server
        self.ns = namespace

    async def call(
        self, method: str, path: str, body: object = None, ctype: str = "application/json"
    ) -> Json:
        return await asyncio.to_thread(self.server.request, method, path, body, ctype)

    def captf_path(self, plural: str, name: str = "") -> str:
        base = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{self.ns}/{plural}"
        return f"{base}/{name}" if name else base

    async def cluster(self, name: str = "c1") -> Json:
        return await self.call("GET", self.captf_path("terraformclusters", name))

    async def get(self, plural: str, name: str) -> Json:
        return await self.call("GET", self.captf_path(plural, name))

    async def annotate(self, plural: str, name: str, notes: dict[str, str | None]) -> Json:
        """Sets (or, with None, removes) annotations on a CAPTF object."""
        patch = {"metadata": {"annotations": notes}}
        return await self.call("PATCH", self.captf_path(plural, name), patch, MERGE)

    async def secret(self, name: str) -> Json:
        return await self.call("GET", f"/api/v1/namespaces/{self.ns}/secrets/{name}")

    async def state_document(self, name: str) -> Json:
        """The state a state (or backup) Secret holds, its parts read and checked as the
        runner reads them (controller/runner/state_layout.py)."""
        body = await read_body(await self.secret(name), self.secret)
        document: Json = orjson.loads(body)
        return document

    async def delete_job(self, name: str) -> None:
        """Deletes a Job the way kubectl does (background propagation: no GC needed)."""
        path = f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}"
        await self.call("DELETE", path, {"propagationPolicy": "Background"})

    async def jobs(self, selector: str = "") -> list[Json]:
        path = f"/apis/batch/v1/namespaces/{self.ns}/jobs"
        if selector:
            path += f"?labelSelector={selector}"
        items: list[Json] = (await self.call("GET", path)).get("items", [])
        return sorted(items, key=_attempt_order)

    async def events(self) -> list[Json]:
        items: list[Json] = (await self.call("GET", f"/api/v1/namespaces/{self.ns}/events")).get(
            "items", []
        )
        return items

    async def setup_cluster(
        self,
        name: str = "c1",
        *,
        files: dict[str, str] = MODULE,
        jobs: Json | None = None,
        **spec: Any,
    ) -> Json:
        """The module ConfigMap (`files`), the credentials Secret (once) and a
        TerraformCluster; `jobs` is added to the runner image, `spec` to the rest."""
        await self.call(
            "POST",
            f"/api/v1/namespaces/{self.ns}/configmaps",
            {"metadata": {"name": f"{name}-module"}, "data": files},
        )
        with contextlib.suppress(Exception):  # AlreadyExists after the first cluster
            await self.call(
                "POST",
                f"/api/v1/namespaces/{self.ns}/secrets",
                {"metadata": {"name": "creds"}, "stringData": {"TOKEN": "t"}},
            )
        owner = await self.capi_cluster(name)
        body = {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "TerraformCluster",
            "metadata": {"name": name, "ownerReferences": [owner_reference(owner)]},
            "spec": {
                "source": {"configMapRef": {"name": f"{name}-module"}},
                "variables": {"size": 1},
                "identityRef": {"kind": "Secret", "name": "creds"},
                "jobs": {"image": "captf:dev"} | (jobs or {}),
                # Drift checks are on by default (30 min, issue 30); a test of another
                # rule that steps the clock past them turns them off (`drift=` overrides).
                "drift": {"interval": "0"},
            }
            | spec,
        }
        return await self.call("POST", self.captf_path("terraformclusters"), body)

    def capi_path(self, plural: str, name: str = "") -> str:
        base = f"/apis/{CAPI_API_VERSION}/namespaces/{self.ns}/{plural}"
        return f"{base}/{name}" if name else base

    async def capi_cluster(self, name: str = "c1", *, infra: str = "") -> Json:
        """A Cluster API Cluster naming the TerraformCluster `infra` ("" its own name), its
        infrastructure shown provisioned (as Cluster API would once the TerraformCluster
        says so): the owner a TerraformCluster acts for and its members run under."""
        infra_ref = {"apiGroup": GROUP, "kind": CLUSTER, "name": infra or name}
        body = {
            "apiVersion": CAPI_API_VERSION,
            "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"infrastructureRef": infra_ref},
        }
        created = await self.call("POST", self.capi_path("clusters"), body)
        status = {"status": {"initialization": {"infrastructureProvisioned": True}}}
        path = self.capi_path("clusters", name) + "/status"
        await self.call("PATCH", path, status, MERGE)
        return created

    async def create_role_member(self, kind: str, name: str, *, cluster: str = "c1") -> Json:
        """A member `kind` named `name` (see create_member) whose module is the contract's
        role module, from the ConfigMap `<name>-module`."""
        await self.call(
            "POST",
            f"/api/v1/namespaces/{self.ns}/configmaps",
            {"metadata": {"name": f"{name}-module"}, "data": ROLE_MODULE},
        )
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {
                "source": {"configMapRef": {"name": f"{name}-module"}},
                "identityRef": {"kind": "Secret", "name": "creds"},
                "jobs": {"image": "captf:dev"},
            },
        }
        return await self.create_member(body, cluster=cluster)

    async def create_member(self, body: Json, *, cluster: str = "c1") -> Json:
        """A TerraformMachinePool or TerraformMachine `body`, with what Cluster API gives a
        member: its owner MachinePool or Machine (naming it back, with bootstrap data), the
        bootstrap data Secret, the owner reference and the cluster-name label."""
        kind, name = body["kind"], body["metadata"]["name"]
        boot = f"{name}-bootstrap"
        await self.call(
            "POST",
            f"/api/v1/namespaces/{self.ns}/secrets",
            {"metadata": {"name": boot}, "stringData": {"value": "#cloud-config\n"}},
        )
        inner = {
            "clusterName": cluster,
            "bootstrap": {"dataSecretName": boot},
            "infrastructureRef": {"apiGroup": GROUP, "kind": kind, "name": name},
        }
        if kind == POOL:
            spec: Json = {"clusterName": cluster, "replicas": 1, "template": {"spec": inner}}
            owner_kind, plural = "MachinePool", "machinepools"
        else:
            spec, owner_kind, plural = inner, "Machine", "machines"
        labels = {LABEL_CLUSTER_NAME: cluster}
        owner = await self.call(
            "POST",
            self.capi_path(plural),
            {
                "apiVersion": CAPI_API_VERSION,
                "kind": owner_kind,
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
            },
        )
        meta = body["metadata"]
        member = body | {
            "metadata": meta
            | {
                "labels": {**(meta.get("labels") or {}), **labels},
                "ownerReferences": [owner_reference(owner)],
            }
        }
        return await self.call("POST", self.captf_path(PLURALS[kind]), member)

    async def finish(
        self,
        job: Json,
        outcome: str | None,
        *,
        at: datetime | None = None,
        reason: str = "BackoffLimitExceeded",
        result: Json | None = None,
        complete: bool | None = None,
    ) -> None:
        """Plays a runner outcome: the result annotation, then the terminal status."""
        at = at or datetime.now(UTC)
        name = job["metadata"]["name"]
        path = f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}"
        if outcome is not None:
            value = orjson.dumps(
                {"outcome": outcome, "message": f"played {outcome}"} | (result or {})
            )
            await self.call(
                "PATCH", path, {"metadata": {"annotations": {ANN_RESULT: value.decode()}}}, MERGE
            )
        await self.call(
            "PATCH",
            path + "/status",
            {
                "status": job_status(
                    outcome == "succeeded" if complete is None else complete, at, reason
                )
            },
            MERGE,
        )

    async def finish_in_pod(
        self,
        job: Json,
        message: str | None,
        *,
        at: datetime | None = None,
        reason: str = "BackoffLimitExceeded",
        complete: bool = False,
    ) -> None:
        """Plays a runner that wrote `message` (None: nothing) as its termination message:
        the Job's pod, as the Job controller labels it, terminated as a kubelet reports
        it, then the Job's terminal status. Nothing is written on the Job but its status."""
        at = at or datetime.now(UTC)
        await self._pod_terminated(job, message, at, exit_code=0 if complete else 1)
        path = f"/apis/batch/v1/namespaces/{self.ns}/jobs/{job['metadata']['name']}/status"
        await self.call("PATCH", path, {"status": job_status(complete, at, reason)}, MERGE)

    async def _pod_terminated(
        self, job: Json, message: str | None, at: datetime, *, exit_code: int
    ) -> Json:
        pods = f"/api/v1/namespaces/{self.ns}/pods"
        template = job["spec"]["template"]
        # The ServiceAccount admission plugin, when on, wants the pod's account to exist;
        # no controller manager runs here to make any.
        account = template["spec"].get("serviceAccountName") or "default"
        with contextlib.suppress(RequestFailed):  # it exists already
            await self.call(
                "POST",
                f"/api/v1/namespaces/{self.ns}/serviceaccounts",
                {"metadata": {"name": account}},
            )
        name = f"{job['metadata']['name']}-p0d"
        body = {
            "metadata": {"name": name, "labels": template["metadata"]["labels"]},
            "spec": template["spec"] | {"automountServiceAccountToken": False},
        }
        await self.call("POST", pods, body)
        terminated: Json = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": format_time(at - timedelta(seconds=5)),
            "finishedAt": format_time(at),
        }
        if message is not None:
            terminated["message"] = message
        container = template["spec"]["containers"][0]
        status = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ],
        }
        return await self.call("PATCH", f"{pods}/{name}/status", {"status": status}, MERGE)


def state_of(kube: Kube, name: str = "c1", kind: str = CLUSTER) -> str:
    """The name of the state Secret of `kind`/`name` in the test's namespace."""
    return state_secret_name(kube.ns, kind, name)


async def write_state(
    kube: Kube,
    job: Json,
    serial: int,
    name: str = "c1",
    *,
    labelled: bool = True,
    legacy: bool = False,
) -> str:
    """Plays the runner's state write after a successful apply: serial and inputs hash,
    labelled with the object's kind and name, and as the runner labels it (`labelled=False`:
    without the managed-by label, as runners before it did). `legacy`: under the name
    before kinds were part of it. Returns the Secret's name."""
    inputs_hash = job["metadata"]["annotations"]["captf.io/inputs-hash"]
    notes = {"captf.io/serial": str(serial), "captf.io/inputs-hash": inputs_hash}
    kind = job["metadata"]["labels"][LABEL_KIND]
    labels = {LABEL_NAME: name, LABEL_KIND: kind} | (MANAGED_BY if labelled else {})
    secret = legacy_state_secret_name(name) if legacy else state_secret_name(kube.ns, kind, name)
    body = {
        "metadata": {"name": secret, "annotations": notes, "labels": labels},
        "stringData": {"terraform.tfstate": "{}"},
    }
    path = f"/api/v1/namespaces/{kube.ns}/secrets"
    try:
        await kube.call("POST", path, body)
    except Exception:
        await kube.call(
            "PATCH",
            f"{path}/{secret}",
            {"metadata": {"annotations": notes, "labels": labels}},
            MERGE,
        )
    return secret


async def write_plan(
    kube: Kube, name: str, data: dict[str, str], of: str = "c1", summary: Json | None = None
) -> None:
    """Plays the runner's plan write: the plan Secret, labelled as the runner labels it,
    with the plan's summary (addresses, actions, counts, fingerprint) when given."""
    labels = {LABEL_PLAN_OF: of} | MANAGED_BY
    meta: Json = {"name": name, "labels": labels}
    if summary is not None:
        meta["annotations"] = {ANN_PLAN_SUMMARY: orjson.dumps(summary).decode()}
    body = {"metadata": meta, "data": data}
    await kube.call("POST", f"/api/v1/namespaces/{kube.ns}/secrets", body)


async def plan_is(kube: Kube, name: str, phase: str) -> Json:
    """Waits until the TerraformPlan `name` exists in that phase; returns it."""

    async def probe() -> Json | None:
        try:
            plan = await kube.get("terraformplans", name)
        except RequestFailed as err:
            if err.status == 404:
                return None
            raise
        return plan if (plan.get("status") or {}).get("phase") == phase else None

    return await eventually(probe, what=f"TerraformPlan {name} in phase {phase}")


async def approve_plan(kube: Kube, name: str) -> Json:
    """A person's approval: spec.approved on the TerraformPlan."""
    return await kube.call(
        "PATCH", kube.captf_path("terraformplans", name), {"spec": {"approved": True}}, MERGE
    )


async def nth_job(kube: Kube, n: int, selector: str = "captf.io/op=apply") -> Json:
    """The n-th Job (1-based, in creation order) matching the label selector, once it exists."""

    async def probe() -> Json | None:
        jobs = await kube.jobs(selector)
        return jobs[n - 1] if len(jobs) >= n else None

    return await eventually(probe, what=f"Job #{n} of {selector}")


async def new_job(kube: Kube, *known: Json, selector: str = "captf.io/op=apply") -> Json:
    """The first Job matching the selector that is none of `known` (pruning may have removed
    some of them, so counting Jobs would not do)."""
    names = {job["metadata"]["name"] for job in known}

    async def probe() -> Json | None:
        fresh = [j for j in await kube.jobs(selector) if j["metadata"]["name"] not in names]
        return fresh[0] if fresh else None

    return await eventually(probe, what=f"a Job of {selector} other than {sorted(names)}")


async def next_is(
    kube: Kube,
    reason: str,
    name: str = "c1",
    plural: str = "terraformclusters",
    *,
    at: str | None = None,
) -> Json:
    """Waits until the object's status.next has this reason (and, given, this `at`);
    returns status.next."""

    seen: list[Json] = [{}]

    async def probe() -> Json | None:
        seen[0] = (await kube.get(plural, name)).get("status") or {}
        nxt: Json = seen[0].get("next") or {}
        return nxt if nxt.get("reason") == reason and at in (None, nxt.get("at")) else None

    try:
        what = f"{plural}/{name} status.next.reason={reason}" + (f" at={at}" if at else "")
        return await eventually(probe, what=what)
    except AssertionError as err:
        raise AssertionError(f"{err}; status: {seen[0]}") from None


def owner_reference(owner: Json) -> Json:
    """A controller owner reference to a Cluster API object, as Cluster API sets it."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def job_notes(job: Json) -> dict[str, str]:
    notes: dict[str, str] = job["metadata"].get("annotations") or {}
    return notes


def job_env(job: Json) -> dict[str, str]:
    """The runner container's environment, name to value."""
    [container] = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def condition(obj: Json, kind: str) -> Json | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


async def condition_is(
    kube: Kube,
    kind: str,
    status: str,
    reason: str | None = None,
    name: str = "c1",
    plural: str = "terraformclusters",
) -> Json:
    """Waits until the object's condition has this status (and reason); returns it."""

    async def probe() -> Json | None:
        cond = condition(await kube.get(plural, name), kind)
        if cond and cond["status"] == status and reason in (None, cond.get("reason")):
            return cond
        return None

    return await eventually(probe, what=f"{plural}/{name} condition {kind}={status} {reason}")


async def events_of(kube: Kube, reason: str) -> list[Json]:
    return [e for e in await kube.events() if e.get("reason") == reason]


async def event_for(kube: Kube, job: str, reason: str) -> Json:
    """Waits for the Event of that reason about that Job (named after it, or naming it)."""

    async def probe() -> Json | None:
        found = [e for e in await events_of(kube, reason) if _about(e, job)]
        return found[0] if found else None

    return await eventually(probe, what=f"a {reason} Event for {job}")


def _about(event: Json, job: str) -> bool:
    return bool(event["metadata"]["name"].startswith(f"{job}.") or job in event.get("message", ""))


async def succeed_apply(
    kube: Kube, job: Json, serial: int, at: datetime, name: str = "c1", *, labelled: bool = True
) -> None:
    """The runner's successful apply: the state written with its inputs hash, then Complete."""
    await write_state(kube, job, serial=serial, name=name, labelled=labelled)
    await kube.finish(job, "succeeded", at=at, result={"stateSerial": serial})


def _attempt_order(job: Json) -> tuple[str, int, str]:
    meta = job["metadata"]
    seq = (meta.get("annotations") or {}).get("captf.io/seq", "0")
    return (meta["creationTimestamp"], int(seq), meta["name"])


def job_status(complete: bool, at: datetime, reason: str) -> Json:
    """A terminal Job status the API server (1.31+) accepts, as the Job controller writes it."""
    start = format_time(at - timedelta(seconds=5))
    when = format_time(at)
    if complete:
        return {
            "startTime": start,
            "completionTime": when,
            "active": 0,
            "succeeded": 1,
            "conditions": [
                _cond("SuccessCriteriaMet", when, "CompletionsReached"),
                _cond("Complete", when, "CompletionsReached"),
            ],
        }
    return {
        "startTime": start,
        "active": 0,
        "failed": 1,
        "conditions": [_cond("FailureTarget", when, reason), _cond("Failed", when, reason)],
    }


def _cond(kind: str, when: str, reason: str) -> Json:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": reason,
        "lastProbeTime": when,
        "lastTransitionTime": when,
    }


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 30.0, what: str = ""
) -> T:
    """Polls until the probe returns something truthy; fails with `what` after the timeout."""
    deadline = time.monotonic() + within
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {within}s waiting for {what or probe}; last: {last!r}")


def install_runner_role(server: ApiServer) -> None:
    """The runner's ClusterRole (manifests/runner-rbac.yaml), once per API server: its name
    is fixed (the controller binds it by name) and its rules the same for every test."""
    for doc in yaml.safe_load_all(RUNNER_ROLE.read_text()):
        if not doc:
            continue
        try:
            server.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", doc)
        except RequestFailed as err:
            if err.status != 409:
                raise


def controller_args(server: ApiServer, namespace: str, **over: Any) -> ControllerConfig:
    """The controller's settings for a test: its namespace, no election, any free port."""
    return replace(
        ControllerConfig(
            kubeconfig=str(server.kubeconfig),
            namespace=namespace,
            controller_namespace=namespace,
            workers=2,
            leader_elect=False,
            metrics_addr="127.0.0.1:0",
        ),
        **over,
    )


@contextlib.asynccontextmanager
async def controller_on(
    server: ApiServer, namespace: str, **spec: Any
) -> AsyncIterator[tuple[Kube, SteppedClock]]:
    """TerraformCluster c1 (with `spec`) set up, then the controller on a stepped clock
    until the block ends."""
    kube, clock = Kube(server, namespace), SteppedClock()
    await kube.setup_cluster(**spec)
    async with running_controller(server, namespace, clock=clock):
        yield kube, clock


@contextlib.asynccontextmanager
async def running_controller(
    server: ApiServer,
    namespace: str,
    clock: Clock | None = None,
    registry: CollectorRegistry | None = None,
    *,
    every_namespace: bool = False,
    **over: Any,
) -> AsyncIterator[None]:
    """The controller in this event loop, until the block ends (then cancelled); its
    metrics go to `registry` when given. It watches `namespace` (its Leases' too), or with
    `every_namespace` all of them."""
    started = anyio.Event()
    config = controller_args(server, namespace, **over)
    if every_namespace:
        config = replace(config, namespace=None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(serve, config, started, clock, registry=registry))
        with anyio.fail_after(30):
            await started.wait()
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


async def create_pool(kube: Kube) -> None:
    """A TerraformMachinePool p1 on its own module ConfigMap, owned by a MachinePool of
    the test's cluster (`Kube.create_member`)."""
    await kube.call(
        "POST",
        f"/api/v1/namespaces/{kube.ns}/configmaps",
        {"metadata": {"name": "p1-module"}, "data": MODULE},
    )
    body = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformMachinePool",
        "metadata": {"name": "p1"},
        "spec": {
            "source": {"configMapRef": {"name": "p1-module"}},
            "variables": {"size": 2},
            "identityRef": {"kind": "Secret", "name": "creds"},
            "jobs": {"image": "captf:dev"},
        },
    }
    await kube.create_member(body)
