"""The controller's own replicas, for the timeline: which one leads, each handover,
which are Ready and where their metrics are, and the Deployment's ready count.

What each change means is decided by pure functions of (old, new) objects, so the
lines are tested without a cluster; `Replicas` only watches and prints them."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import anyio
from prometheus_client.parser import text_string_to_metric_families

from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.io.api import DEPLOYMENTS, LEASES, PODS
from runtime.cache import Informer, Resource, Selection
from runtime.cache.reflector import ListWatchTransport
from runtime.clock import LoopClock
from runtime.jsonobj import Json

Say = Callable[[str, str], None]

CONTROLLER_PODS = "app.kubernetes.io/name=captf,app.kubernetes.io/component=controller"


def replica_of(identity: str | None) -> str | None:
    """The pod in a leader identity `<pod>_<random>` (`captf run` makes it so)."""
    return identity.rsplit("_", 1)[0] if identity else None


def _time(spec: Json, field: str) -> datetime | None:
    try:
        return parse_time(spec[field]) if spec.get(field) else None
    except TimeFormatError:
        return None


def lease_change(old: Json | None, new: Json | None) -> str | None:
    """The line for a change of the leader Lease, or None when only a renewal happened.

    A handover is timed from the moment the Lease stopped protecting anyone: the
    release of a leader that stopped cleanly, or the last renewal of one that did
    not (the standby had to wait for that to expire)."""
    before = (old or {}).get("spec") or {}
    after = (new or {}).get("spec") or {}
    was, now = before.get("holderIdentity"), after.get("holderIdentity")
    if was == now:
        return None
    if not now:
        return f"released by {replica_of(was)}"
    took = _time(after, "acquireTime")
    since = _time(before, "renewTime")
    if not was and since is not None and took is not None and old is not None:
        # Taken after a release: `since` is the release.
        return (
            f"leader: {replica_of(now)} ({(took - since).total_seconds():.1f}s after the release)"
        )
    if was and since is not None and took is not None:
        gap = (took - since).total_seconds()
        return f"leader: {replica_of(now)} ({replica_of(was)} stopped renewing {gap:.1f}s before)"
    return f"leader: {replica_of(now)}"


def metrics_url(pod: Json) -> str | None:
    ip = (pod.get("status") or {}).get("podIP")
    for container in pod["spec"]["containers"]:
        for port in container.get("ports") or []:
            if port.get("name") == "metrics" and ip:
                return f"http://{ip}:{port['containerPort']}/metrics"
    return None


def sample_sum(page: str, family: str, sample: str | None = None) -> float:
    """The sum of a metric family's samples on one /metrics page; `sample` picks one
    series name of it (e.g. a histogram's `<family>_count`)."""
    return sum(
        s.value
        for f in text_string_to_metric_families(page)
        if f.name == family
        for s in f.samples
        if sample is None or s.name == sample
    )


def scrape_sum(pods: Iterable[Json], family: str, sample: str | None = None) -> float:
    """`sample_sum` over every pod's /metrics (blocking; run it in a thread). A replica that
    does not answer (starting, stopping) counts nothing: its registry is empty anyway."""
    total = 0.0
    for pod in pods:
        url = metrics_url(pod)
        if url is None:
            continue
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                total += sample_sum(answer.read().decode(), family, sample)
        except OSError:
            continue
    return total


def _ready(pod: Json | None) -> bool:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_change(old: Json | None, new: Json | None) -> str | None:
    """The line for a controller pod that became Ready, stopped being Ready, or went."""
    if new is None:
        return "deleted"
    if new["metadata"].get("deletionTimestamp") and not (old or {}).get("metadata", {}).get(
        "deletionTimestamp"
    ):
        return "stopping (SIGTERM)"
    if _ready(new) and not _ready(old):
        return f"Ready; metrics at {metrics_url(new)}"
    if _ready(old) and not _ready(new):
        return "not Ready"
    return None


def deployment_change(old: Json | None, new: Json | None) -> str | None:
    """The line for a change of the Deployment's ready count."""
    if new is None:
        return None

    def ready(d: Json | None) -> int:
        return int(((d or {}).get("status") or {}).get("readyReplicas") or 0)

    if old is not None and ready(old) == ready(new):
        return None
    return f"{ready(new)}/{new['spec'].get('replicas', 1)} Ready"


class Replicas:
    """Watches the Deployment `name` in `namespace`, its pods and its leader Lease."""

    def __init__(
        self, transport: ListWatchTransport, *, namespace: str, name: str, say: Say
    ) -> None:
        real = LoopClock()
        self._say = say

        def informer(resource: Resource, labels: str | None, fields: str | None) -> Informer:
            selection = Selection(namespace, label_selector=labels, field_selector=fields)
            return Informer(transport, resource, clock=real, selection=selection)

        named = f"metadata.name={name}"
        self._informers: list[tuple[Informer, str, Callable[..., str | None]]] = [
            (informer(LEASES, None, named), "Lease", lease_change),
            (informer(DEPLOYMENTS, None, named), "Deployment", deployment_change),
            (informer(PODS, CONTROLLER_PODS, None), "Pod", pod_change),
        ]
        for inf, kind, describe in self._informers:
            inf.add_handler(self._handler(kind, describe))

    def _handler(self, kind: str, describe: Callable[..., str | None]) -> Any:
        def handle(old: Json | None, new: Json | None) -> None:
            line = describe(old, new)
            if line:
                name = (new or old or {}).get("metadata", {}).get("name")
                self._say(f"{kind}/{name}", line)

        return handle

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            for inf, _, _ in self._informers:
                tg.start_soon(inf.run)
