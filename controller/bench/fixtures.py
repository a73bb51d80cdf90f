"""The bench's cluster: N idle objects, each with its state Secret and finished Jobs,
and the Secrets nobody reads, created over a bounded number of concurrent requests."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from controller.core.basics.names import (
    ANN_ACCOUNTED,
    ANN_INPUTS_HASH,
    ANN_RESULT,
    ANN_SERIAL,
    API_VERSION,
    CLUSTER,
    FINALIZER,
    LABEL_KIND,
    LABEL_NAME,
    MANAGED_BY,
    state_secret_name,
)
from controller.core.basics.timefmt import format_time
from controller.core.decide.decision import Run
from controller.core.jobs.naming import job_name
from controller.core.plan.jobspec import build_job
from controller.core.spec.inputs import render
from controller.core.spec.policy import DEFAULT_IMAGES, read_policy
from controller.io.api import CONFIGMAPS, JOBS, NAMESPACES, OBJECTS, SECRETS, resource_path
from runtime.transport import MERGE_PATCH, Transport

CLUSTERS = OBJECTS[CLUSTER]
PER_NAMESPACE = 100
JOBS_PER_OBJECT = 3
CONCURRENCY = 32
MERGE = MERGE_PATCH

CONTROLLER_NAMESPACE = "captf-system"
# Quiet this long and the controller has settled.
SETTLE_SECONDS = 3.0
MIB = 1 << 20


def namespace_body(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def _spec(deadline: int = 3600) -> dict[str, Any]:
    return {
        "source": {"configMapRef": {"name": "module"}},
        "variables": {"size": 1, "region": "eu-west-1"},
        "identityRef": {"kind": "Secret", "name": "creds"},
        "jobs": {
            "image": DEFAULT_IMAGES[0],
            "successfulJobsHistoryLimit": JOBS_PER_OBJECT,
            "activeDeadlineSeconds": deadline,
        },
    }


MODULE = {"main.tf": 'variable "size" {}\nvariable "region" {}\n'}


async def populate(transport: Transport, objects: int, unrelated: int) -> None:
    namespaces = [f"scale-{i:04}" for i in range((objects + PER_NAMESPACE - 1) // PER_NAMESPACE)]
    configmap = {"metadata": {"name": "module"}, "data": MODULE}
    creds = {"metadata": {"name": "creds"}, "stringData": {"TOKEN": "t"}}
    for ns in namespaces:
        await create(transport, resource_path(NAMESPACES), namespace_body(ns))
        await create(transport, resource_path(CONFIGMAPS, ns), configmap)
        await create(transport, resource_path(SECRETS, ns), creds)
    cm = {"module": {"data": MODULE}}
    inputs = render(_spec(), cm, {"creds": {"data": {"TOKEN": "dA=="}}})
    names = [(namespaces[i // PER_NAMESPACE], f"c{i:05}") for i in range(objects)]
    await _all(lambda item: _object(transport, item[0], item[1], inputs.hash), names, every=1000)
    filler = "x" * 2048
    await _all(
        lambda i: create(
            transport,
            resource_path(SECRETS, namespaces[i % len(namespaces)]),
            {"metadata": {"name": f"unrelated-{i:05}"}, "stringData": {"blob": filler}},
        ),
        range(unrelated),
        every=5000,
    )


async def _object(transport: Transport, ns: str, name: str, inputs_hash: str) -> None:
    body = {
        "apiVersion": API_VERSION,
        "kind": "TerraformCluster",
        "metadata": {"name": name, "finalizers": [FINALIZER]},
        "spec": _spec(),
    }
    obj = await create(transport, resource_path(CLUSTERS, ns), body)
    state = {
        "metadata": {
            "name": state_secret_name(ns, "TerraformCluster", name),
            "labels": {LABEL_NAME: name, LABEL_KIND: "TerraformCluster"} | MANAGED_BY,
            "annotations": {ANN_SERIAL: str(JOBS_PER_OBJECT), ANN_INPUTS_HASH: inputs_hash},
        },
        "stringData": {"terraform.tfstate": "{}"},
    }
    await create(transport, resource_path(SECRETS, ns), state)
    cm = {"module": {"data": MODULE}}
    inputs = render(obj["spec"], cm, {"creds": {"data": {"TOKEN": "dA=="}}})
    policy = read_policy(obj["spec"])
    now = datetime.now(UTC)
    for seq in range(1, JOBS_PER_OBJECT + 1):
        uid = obj["metadata"]["uid"]
        job = build_job(
            obj,
            Run("apply", "InputsChanged", 1),
            inputs=inputs,
            policy=policy,
            seq=seq,
            name=job_name(name, uid, "apply", seq),
        )
        result = {"outcome": "succeeded", "message": "applied", "stateSerial": seq}
        job["metadata"]["annotations"] |= {
            ANN_RESULT: orjson.dumps(result).decode(),
            ANN_ACCOUNTED: "true",
        }
        created = await create(transport, resource_path(JOBS, ns), job)
        at = now - timedelta(minutes=10 * (JOBS_PER_OBJECT - seq) + 1)
        path = resource_path(JOBS, ns, created["metadata"]["name"], sub="status")
        status = {"status": _complete(at)}
        await transport.request("PATCH", path, body=status, content_type=MERGE)


def _complete(at: datetime) -> dict[str, Any]:
    when = format_time(at)

    def cond(kind: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": "True",
            "reason": "CompletionsReached",
            "message": "Reached expected number of succeeded pods",
            "lastProbeTime": when,
            "lastTransitionTime": when,
        }

    return {
        "startTime": format_time(at - timedelta(seconds=30)),
        "completionTime": when,
        "active": 0,
        "succeeded": 1,
        "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
    }


async def create(transport: Transport, path: str, body: dict[str, Any]) -> dict[str, Any]:
    return await transport.request("POST", path, body=body)


async def _all(call: Callable[[Any], Awaitable[Any]], items: Iterable[Any], *, every: int) -> None:
    """`call` on every item, CONCURRENCY at a time; progress every `every` items."""
    limit = asyncio.Semaphore(CONCURRENCY)
    done = 0

    async def one(item: Any) -> None:
        nonlocal done
        async with limit:
            await call(item)
        done += 1
        if done % every == 0:
            say(f"{done} created")

    async with asyncio.TaskGroup() as group:
        for item in items:
            await limit.acquire()
            limit.release()
            group.create_task(one(item))


def say(message: str) -> None:
    """A progress line on stderr: stdout carries only the final JSON line."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
