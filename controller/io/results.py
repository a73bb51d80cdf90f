"""The live reads behind a finished Job's result, and recording it on the Job.

The runner cannot write Jobs: its result is its container's termination message,
which the kubelet puts in the pod's status. Once a Job finished and records no
result, the pass lists the Job's pods (by the Job controller's uid label) and reads
the message; the core checks it (controller/core/jobs/termination.py), the Snapshot
shows it on the Job, and the plan records it there as `captf.io/result` (its message
redacted with the values the Job carried), before the Job is accounted. From then on
the Job is the record, as it always was: a restart finds the result on the Job, or,
before it was recorded, still on the pod.

Why a live list and not a pod informer: the read is needed once per Job (a Job with
a result, or an accounted one, is never read again), and it is read after the Job
was seen finished, when the kubelet has already written the message (the Job
controller finishes a Job from the pod status that carries it). A pod cache would be
a second watch of every runner pod, for one field read once, and could lag behind
the Job cache, making a finished Job look like one without a result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.core import (
    JOB_UID_LABEL,
    Recorded,
    message_of,
    needs_result,
    result_of,
    with_result,
)
from controller.core.basics.names import ANN_RESULT
from controller.io import api
from controller.io.api import PODS, Api
from runtime.errors import ApiError
from runtime.jsonobj import Json


async def read(client: Api, jobs: Sequence[Json]) -> dict[str, str]:
    """Job name -> the result to record, for the finished Jobs that record none and whose
    pod still holds a termination message. A Job whose pod is gone is left out: it reads
    as a Job that finished without a result."""
    found: dict[str, str] = {}
    for job in jobs:
        if not needs_result(job):
            continue
        message = message_of(await _pods_of(client, job))
        if message is not None:
            found[job["metadata"]["name"]] = result_of(message, str(job["metadata"]["uid"]))
    return found


def shown(jobs: Sequence[Json], found: Mapping[str, str]) -> list[Json]:
    """The Jobs as they are once `found` is recorded: what the pass's Snapshot shows."""
    return [
        with_result(job, found[name]) if (name := job["metadata"]["name"]) in found else job
        for job in jobs
    ]


async def _pods_of(client: Api, job: Json) -> list[Json]:
    meta = job["metadata"]
    params = {"labelSelector": f"{JOB_UID_LABEL}={meta['uid']}"}
    listed = await client.request("GET", api.resource_path(PODS, meta["namespace"]), params=params)
    return [pod for pod in listed.get("items") or [] if isinstance(pod, dict)]


async def record(client: Api, namespace: str, recorded: Recorded) -> None:
    """The result as the Job's annotation, on exactly the incarnation it was read for (the
    uid in the patch must match). A Job gone meanwhile has nothing left to record on."""
    meta: Json = {"annotations": {ANN_RESULT: recorded.value}}
    if recorded.uid:
        meta["uid"] = recorded.uid
    try:
        await api.merge_patch(client, api.job_path(namespace, recorded.job), {"metadata": meta})
    except ApiError as err:
        if err.status != 404 and not (err.status == 422 and "metadata.uid" in str(err)):
            raise


async def end(client: Api, namespace: str, ending: Recorded) -> None:
    """Ends a Job that cannot start (controller/core/jobs/starting.py): its failed result
    and activeDeadlineSeconds 1, in one patch of exactly that incarnation. The Job
    controller fails it (DeadlineExceeded) and deletes its pod; the result says why."""
    meta: Json = {"annotations": {ANN_RESULT: ending.value}}
    if ending.uid:
        meta["uid"] = ending.uid
    patch = {"metadata": meta, "spec": {"activeDeadlineSeconds": 1}}
    try:
        await api.merge_patch(client, api.job_path(namespace, ending.job), patch)
    except ApiError as err:
        if err.status != 404 and not (err.status == 422 and "metadata.uid" in str(err)):
            raise
