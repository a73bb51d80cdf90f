"""Draining a node as `kubectl drain` does: cordon it, then evict each of its pods
through the Eviction API, so every disruption is the one a real cluster makes.

The API server answers an eviction by adding the DisruptionTarget condition
(EvictionByEvictionAPI) and deleting the pod with its grace period; the node then
stops it. A Job controller seeing that condition applies the Job's
podFailurePolicy. An eviction a PodDisruptionBudget refuses (429) is retried
until `timeout`."""

from __future__ import annotations

import logging

from controller.dev.node.api import Requester
from controller.io.api import NODES, PODS, resource_path
from runtime.clock import Clock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.transport import MERGE_PATCH

logger = logging.getLogger("controller.dev.node")


RETRY_SECONDS = 5.0


class DrainTimeout(Exception):
    """A PodDisruptionBudget kept refusing an eviction."""


async def cordon(
    transport: Requester,
    node: str,
    *,
    unschedulable: bool = True,
    annotations: dict[str, str | None] | None = None,
) -> None:
    """Mark the node (un)schedulable: a cordoned node binds no new pod. `annotations` are
    set (None: removed) in the same write."""
    body: Json = {"spec": {"unschedulable": unschedulable or None}}
    if annotations:
        body["metadata"] = {"annotations": annotations}
    await transport.request(
        "PATCH",
        resource_path(NODES, None, node),
        body=body,
        content_type=MERGE_PATCH,
    )


async def drain(
    transport: Requester,
    node: str,
    clock: Clock,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    timeout: float = 120.0,  # noqa: ASYNC109 -- the PDB retry budget, as kubectl's --timeout
) -> list[str]:
    """Cordon `node` and evict its running pods (of `namespace`, matching
    `label_selector`); returns "namespace/name" of each pod evicted."""
    await cordon(transport, node)
    evicted = []
    for pod in await _pods(transport, node, namespace, label_selector):
        meta = pod["metadata"]
        if await _evict(transport, pod, clock, timeout):
            evicted.append(f"{meta['namespace']}/{meta['name']}")
    return evicted


async def _pods(
    transport: Requester, node: str, namespace: str | None, label_selector: str | None
) -> list[Json]:
    params = {"fieldSelector": f"spec.nodeName={node}"}
    if label_selector:
        params["labelSelector"] = label_selector
    path = resource_path(PODS, namespace or None)
    listed = await transport.request("GET", path, params=params)
    return [
        pod
        for pod in listed.get("items") or []
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and not pod["metadata"].get("deletionTimestamp")
    ]


async def _evict(transport: Requester, pod: Json, clock: Clock, timeout: float) -> bool:  # noqa: ASYNC109
    meta = pod["metadata"]
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "deleteOptions": {"preconditions": {"uid": meta["uid"]}},
    }
    path = resource_path(PODS, meta["namespace"], meta["name"], sub="eviction")
    waited = 0.0
    while True:
        try:
            await transport.request("POST", path, body=body)
            logger.info("evicted %s/%s", meta["namespace"], meta["name"])
            return True
        except ApiError as exc:
            if exc.status == 404:
                return False
            if exc.status != 429:
                raise
            if waited >= timeout:
                raise DrainTimeout(
                    f"{meta['namespace']}/{meta['name']}: eviction refused for {timeout:.0f}s: "
                    f"{exc.message}"
                ) from None
            logger.info("%s/%s: %s; retrying", meta["namespace"], meta["name"], exc.message)
            await clock.sleep(RETRY_SECONDS)
            waited += RETRY_SECONDS
