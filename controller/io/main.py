"""`captf run`: the controller process.

Order of start-up: transport, metrics and health endpoints, leadership, then
caches and workers. Readiness turns true once every cache has synced; losing
leadership stops all writes and exits non-zero."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

import anyio
from prometheus_client import CollectorRegistry

from controller.io import capped
from controller.io.bookkeeper import JobMetrics
from controller.io.caches import Caches, wire_handlers
from controller.io.janitor import sweep_forever
from controller.io.launcher import Slots
from controller.io.reconciler import Reconciler
from runtime import logs
from runtime.clock import Clock, LoopClock
from runtime.events import EventErrorReporter, EventRecorder
from runtime.health import HealthServer
from runtime.leader import LeaderLost, leader_election
from runtime.loop import Controller
from runtime.metrics import RuntimeMetrics
from runtime.timeorigin import scaled_clock
from runtime.transport import Transport, open_transport
from runtime.workqueue import RateLimitingQueue

log = logging.getLogger("captf")
# The ConfigMap, in the controller's namespace, that records --time-scale's origin.
TIME_ORIGIN = "captf-time-origin"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def controller_namespace(explicit: str | None) -> str:
    """Where run slots and the leader Lease live: the flag, the pod's namespace, or default."""
    if explicit:
        return explicit
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if SERVICE_ACCOUNT_NAMESPACE.exists():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return "default"


def run(args: argparse.Namespace) -> int:
    logs.setup(args.log_format)
    if args.max_concurrent_runs < 1 or args.workers < 1 or args.time_scale <= 0:
        print(
            "captf run: --max-concurrent-runs, --workers and --time-scale must be positive",
            file=sys.stderr,
        )
        return 2
    try:
        asyncio.run(serve(args))
    except LeaderLost as err:
        # By design: another replica may be writing already. One line says it all.
        log.warning("leadership handed over: %s; exiting 1 to restart as a standby", err)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


async def serve(
    args: argparse.Namespace, started: anyio.Event | None = None, clock: Clock | None = None
) -> None:
    """The controller until cancelled. `clock` drives decisions and requeues (default: the
    loop's clock at --time-scale, on the timeline recorded in the API server, so a
    restart continues it); caches and leader election always keep real time."""
    ns = controller_namespace(args.controller_namespace)
    async with open_transport(args.kubeconfig) as transport:
        clock = clock or await scaled_clock(transport, ns, TIME_ORIGIN, args.time_scale)
        registry = CollectorRegistry()
        health = HealthServer(registry, address=args.metrics_addr)
        caches = Caches(transport, clock=LoopClock(), namespace=args.namespace)
        capped.register(registry, caches)
        health.add_readiness_check(
            "caches", lambda: all(i.synced.is_set() for i in caches.informers())
        )
        metrics = RuntimeMetrics(registry)
        async with health:
            if not args.leader_elect:
                await _control(transport, caches, metrics, clock, args, ns, started)
                return
            leading = metrics.leader.labels(args.leader_election_id)
            leading.set(0)
            # Leases are kept on real time: other replicas read them with unscaled clocks.
            async with leader_election(
                transport,
                namespace=ns,
                name=args.leader_election_id,
                clock=LoopClock(),
                on_leading=lambda now: leading.set(1 if now else 0),
            ) as lead:
                log.info("leading as %s", lead.identity)
                await _control(transport, caches, metrics, clock, args, ns, started)


async def _control(
    transport: Transport,
    caches: Caches,
    runtime_metrics: RuntimeMetrics,
    clock: Clock,
    args: argparse.Namespace,
    namespace: str,
    started: anyio.Event | None,
) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        clock=clock, observer=runtime_metrics.queue("captf", clock)
    )
    reconciler = Reconciler(
        client=transport,
        caches=caches,
        clock=clock,
        metrics=JobMetrics(runtime_metrics.registry),
        slots=Slots(namespace=namespace, count=args.max_concurrent_runs),
    )
    recorder = EventRecorder(transport, component="captf-controller", clock=clock)
    reporter = EventErrorReporter(recorder, lambda key: _lookup(caches, key))
    async with queue, anyio.create_task_group() as tg:
        wire_handlers(caches, queue.add)
        for informer in caches.informers():
            tg.start_soon(informer.run, name=f"informer {informer.resource.plural}")
        for informer in caches.informers():
            await informer.wait_synced()
        log.info("caches synced; reconciling with %d workers", args.workers)
        tg.start_soon(
            sweep_forever,
            transport,
            caches,
            reconciler.creating,
            clock,
            args.namespace,
            name="lease janitor",
        )
        if started is not None:
            started.set()
        controller = Controller(
            "captf",
            reconciler,
            queue,
            clock=clock,
            workers=args.workers,
            observer=runtime_metrics.reconcile("captf"),
            reporter=reporter,
            log_fields=_object_fields,
        )
        await controller.run()


def _object_fields(key: str) -> dict[str, object]:
    """A reconcile's object in the logs, as controller-runtime names it."""
    kind, namespace, name = key.split("/", 2)
    return {"object": {"kind": kind, "namespace": namespace, "name": name}}


def _lookup(caches: Caches, key: str) -> dict[str, object] | None:
    kind, namespace, name = key.split("/", 2)
    return caches.object(kind, namespace, name)
