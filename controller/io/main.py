"""`captf run`: the controller process.

Order of start-up: transport, metrics and health endpoints, leadership, then
caches and workers. Ready means able to serve its role: a standby once the API
server answers its campaign, the leader once every cache has synced. Losing
leadership stops all writes and exits 1.

SIGTERM or SIGINT stops it cleanly and exits 0: a standby stops campaigning at
once; the leader takes no new keys, gives the reconciles in flight up to
DRAIN_GRACE to finish and abandons the rest (each reconcile step is idempotent,
so an abandoned one is replayed by the next leader exactly as after a crash),
then releases its Lease so a standby takes over at once."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import socket
import sys
from dataclasses import dataclass
from functools import partial

import anyio
from prometheus_client import CollectorRegistry

from controller.core.basics.names import TIME_ORIGIN
from controller.io import metrics_set
from controller.io.caches import Caches
from controller.io.config import ControllerConfig
from controller.io.dispatch import ByKind
from controller.io.endpoints import (
    WebhookCannotListen,
    health_addr,
    secure_metrics,
    url_host,
    webhooks,
)
from controller.io.handlers import wire_handlers
from controller.io.identities import IdentityKeeper
from controller.io.image_volumes import leading_settings
from controller.io.janitor import sweep_forever
from controller.io.keys import parse_key
from controller.io.metrics_set import ControllerMetrics
from controller.io.migration import migrate_storage
from controller.io.object_metrics import CacheStores
from controller.io.reconciler import Reconciler
from controller.io.stretcher import stretch_forever
from controller.io.templates import TemplateKeeper
from controller.io.writes import NotingWrites
from runtime import logs
from runtime.cache.heap import FreezeWhileFilling, PauseWatch, raise_thresholds
from runtime.clock import Clock, LoopClock
from runtime.events import EventErrorReporter, EventRecorder
from runtime.health import CannotListen, HealthServer, parse_address
from runtime.incluster import service_account_dir
from runtime.leader import LEASE_DURATION, Candidacy, LeaderLost, leader_election
from runtime.loop import Controller
from runtime.metrics import RuntimeMetrics
from runtime.shutdown import StopRequest, stop_on_signals
from runtime.timeorigin import OriginError, scaled_clock
from runtime.transport import Transport, open_transport
from runtime.workqueue import RateLimitingQueue

log = logging.getLogger("captf")
# How long a stopping leader lets reconciles in flight finish. One reconcile is a
# handful of API calls (well under a second); one still running after this is stuck
# on a slow API server, and the Lease is better handed over than held for it.
DRAIN_GRACE = 3.0


def controller_namespace(explicit: str | None) -> str:
    """Where run slots and the leader Lease live: the flag, the pod's namespace, or default."""
    if explicit:
        return explicit
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    # The pod's own ServiceAccount directory (a process node names it in the environment).
    mounted = service_account_dir() / "namespace"
    if mounted.exists():
        return mounted.read_text().strip()
    return "default"


def leader_identity() -> str:
    """The pod's name (many pods share a node's hostname) or the hostname, plus a random
    suffix: a restarted process must not mistake its predecessor's Lease for its own."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{secrets.token_hex(4)}"


def run(args: argparse.Namespace) -> int:
    config = ControllerConfig.from_args(args)
    logs.setup(config.log_format)
    raise_thresholds()
    problem = config.problem()
    if problem is not None:
        print(f"captf run: {problem}", file=sys.stderr)
        return 2
    for flag, address in (
        ("--metrics-addr", config.metrics_addr),
        ("--webhook-addr", config.webhook_addr),
    ):
        try:
            parse_address(address) if address is not None else None
        except ValueError as err:
            print(f"captf run: {flag}: {err}", file=sys.stderr)
            return 2
    try:
        asyncio.run(_until_signalled(config))
    except LeaderLost as err:
        # By design: another replica may be writing already. One line says it all.
        log.warning("leadership handed over: %s; exiting 1 to restart as a standby", err)
        return 1
    except WebhookCannotListen as err:
        print(f"captf run: --webhook-addr: {err}", file=sys.stderr)
        return 2
    except CannotListen as err:
        print(f"captf run: --metrics-addr: {err}", file=sys.stderr)
        return 2
    except OriginError as err:
        # Not the API server's momentary trouble (that is waited out): a configuration
        # to fix, such as RBAC that does not let it read the ConfigMap.
        print(f"captf run: --time-scale: {err}", file=sys.stderr)
        return 2
    return 0


async def _until_signalled(args: ControllerConfig) -> None:
    stop = StopRequest()
    with stop_on_signals(stop):
        await serve(args, stop=stop)
    log.info("stopped")


async def serve(
    args: ControllerConfig,
    started: anyio.Event | None = None,
    clock: Clock | None = None,
    stop: StopRequest | None = None,
    registry: CollectorRegistry | None = None,
) -> None:
    """The controller until `stop` is set (then it returns) or it is cancelled. `clock`
    drives decisions and requeues (default: the loop's clock at --time-scale, on the
    timeline recorded in the API server, so a restart continues it); caches and leader
    election always keep real time. `registry` receives the metrics (default: a new one)."""
    ns = controller_namespace(args.controller_namespace)
    stop = stop or StopRequest()
    async with open_transport(args.kubeconfig) as transport:
        # The origin read waits out an unreachable API server; a stop ends the wait.
        with anyio.CancelScope() as starting, stop.calls(starting.cancel):
            clock = clock or await scaled_clock(transport, ns, TIME_ORIGIN, args.time_scale)
        if clock is None:  # stopped first
            log.info("stopped before the time origin could be read")
            return
        registry = registry or CollectorRegistry()
        # Job times are the wall clock's: on a scaled clock they are moved onto it.
        scaled = isinstance(clock, LoopClock) and clock.scale != 1.0
        job_clock = clock.from_wall if scaled and isinstance(clock, LoopClock) else None
        caches = Caches(
            transport,
            clock=LoopClock(),
            namespace=args.watched(),
            label_selector=args.watch_label_selector,
            job_clock=job_clock,
            slot_namespace=ns,
            cluster_scoped=not args.namespaces,
        )
        pauses = PauseWatch()
        metrics = metrics_set.register(
            registry,
            CacheStores(caches),
            names=args.metrics_object_names,
            longest_pause=lambda: pauses.longest,
        )
        parts = _Parts(
            args=args,
            transport=transport,
            caches=caches,
            metrics=metrics,
            clock=clock,
            lease_clock=LoopClock(),
            namespace=ns,
            started=started,
            stop=stop,
        )
        candidacy = Candidacy(leading=not args.leader_elect)
        secure = args.metrics_secure
        health = HealthServer(registry, address=health_addr(args), metrics=not secure)
        health.add_readiness_check("role", lambda: _serves_its_role(candidacy, parts))
        with pauses:
            async with (
                health,
                secure_metrics(args, registry, transport),
                webhooks(args, transport),
            ):
                if secure:
                    log.info("health on http://%s/healthz", url_host(args, health.port))
                else:
                    log.info("metrics and health on http://%s/metrics", url_host(args, health.port))
                if args.leader_elect:
                    await _campaign_then_control(parts, candidacy)
                else:
                    await _control(parts)


@dataclass(frozen=True, slots=True)
class _Parts:
    """What the controlling part of the process is built from."""

    args: ControllerConfig
    transport: Transport
    caches: Caches
    metrics: ControllerMetrics
    clock: Clock
    # Leases are kept on real time: other replicas read them with unscaled clocks.
    lease_clock: Clock
    namespace: str  # of the run slots and the leader Lease
    started: anyio.Event | None
    stop: StopRequest


def _serves_its_role(candidacy: Candidacy, parts: _Parts) -> bool:
    """/readyz: the leader once its caches have synced; a standby while the API server
    answers its campaign (it could take over the moment the Lease comes free)."""
    if candidacy.leading:
        return all(i.synced.is_set() for i in parts.caches.informers())
    return parts.lease_clock.monotonic() - candidacy.answered_at < LEASE_DURATION


async def _campaign_then_control(parts: _Parts, candidacy: Candidacy) -> None:
    leading = parts.metrics.runtime.leader.labels(parts.args.leader_election_id)
    leading.set(0)
    with anyio.CancelScope() as campaign:

        def stop_campaigning() -> None:
            # A leader stops through `_control`, which hands its work over cleanly.
            if not candidacy.leading:
                campaign.cancel()

        with parts.stop.calls(stop_campaigning):
            async with leader_election(
                parts.transport,
                namespace=parts.namespace,
                name=parts.args.leader_election_id,
                clock=parts.lease_clock,
                identity=leader_identity(),
                candidacy=candidacy,
                on_leading=lambda now: leading.set(1 if now else 0),
            ) as lead:
                log.info("leading as %s", lead.identity)
                await _control(parts)


async def _control(parts: _Parts) -> None:
    args, clock, caches, runtime_metrics = (
        parts.args,
        parts.clock,
        parts.caches,
        parts.metrics.runtime,
    )
    queue = work_queue(clock, runtime_metrics)
    reconciler = Reconciler(
        client=NotingWrites(parts.transport, caches),
        caches=caches,
        clock=clock,
        metrics=parts.metrics.jobs,
        settings=await leading_settings(args, parts.transport, parts.namespace),
        passes=parts.metrics.passes,
    )
    recorder = EventRecorder(parts.transport, component="captf-controller", clock=clock)
    # The identities' reconciler shares the queue: their keys name their kind (dispatch.py).
    identities = IdentityKeeper(reconciler.client, caches, clock)
    assert reconciler.registry is not None  # made with the reconciler: one lookup cache
    templates = TemplateKeeper(reconciler.client, caches, clock, reconciler.registry)
    controller = Controller(
        "captf",
        ByKind(reconciler, identities, templates, parts.metrics.triggers),
        queue,
        clock=clock,
        workers=args.workers,
        observer=runtime_metrics.reconcile("captf"),
        reporter=EventErrorReporter(recorder, lambda key: _lookup(caches, key)),
        log_fields=_object_fields,
    )
    async with queue, anyio.create_task_group() as tg:
        tg.start_soon(_drain_on, parts.stop, controller, tg.cancel_scope, name="stop")
        wire_handlers(caches, queue.add, parts.metrics.triggers)
        filling = FreezeWhileFilling()
        for informer in caches.informers():
            informer.add_handler(filling)  # before it runs: it counts the initial adds
            tg.start_soon(informer.run, name=f"informer {informer.resource.plural}")
        with anyio.CancelScope() as syncing, parts.stop.calls(syncing.cancel):
            for informer in caches.informers():
                await informer.wait_synced()
        if not parts.stop.is_set():
            filling.settle()
            log.info("caches synced; reconciling with %d workers", args.workers)
            tg.start_soon(
                sweep_forever,
                parts.transport,
                caches,
                reconciler.memory,
                clock,
                args.watched_filter(),
                name="lease janitor",
            )
            tg.start_soon(
                stretch_forever,
                parts.transport,
                caches,
                clock,
                reconciler.settings,
                parts.metrics.background,
                name="background stretch",
            )
            if args.watched() is None:
                # On real time: its retries spare the API server, which no scale speeds up.
                migration = partial(migrate_storage, parts.transport, LoopClock())
                tg.start_soon(migration, name="storage migration")
            if parts.started is not None:
                parts.started.set()
            await controller.run()
        # Every worker is done: the informers, the janitor and the drain go too.
        tg.cancel_scope.cancel()


def work_queue(clock: Clock, runtime_metrics: RuntimeMetrics) -> RateLimitingQueue[str]:
    """Requeues wait on the decision clock; retries after a conflict or a transient error
    back off on real time, like the caches and the Leases: the backoff spares the API
    server, which --time-scale does not speed up, and on a clock that only moves when
    told (tests) a retry would wait until something else happened to move it."""
    return RateLimitingQueue(
        clock=clock, observer=runtime_metrics.queue("captf", clock), retry_clock=LoopClock()
    )


async def _drain_on(stop: StopRequest, controller: Controller, work: anyio.CancelScope) -> None:
    """Once `stop` is set: no new keys, then DRAIN_GRACE for those in flight; then `work`
    (every worker) is cancelled."""
    await stop.wait()
    log.info("stopping: no new reconciles; up to %gs for those in flight", DRAIN_GRACE)
    controller.stop()
    await anyio.sleep(DRAIN_GRACE)
    log.warning("reconciles still running after %gs abandoned", DRAIN_GRACE)
    work.cancel()


def reconcile_errors(registry: CollectorRegistry) -> float:
    """controller_runtime_reconcile_errors_total of the controller, as /metrics shows it."""
    found = registry.get_sample_value(
        "controller_runtime_reconcile_errors_total", {"controller": "captf"}
    )
    return found or 0.0


def _object_fields(key: str) -> dict[str, object]:
    """A reconcile's object in the logs, as controller-runtime names it."""
    kind, namespace, name = parse_key(key)
    return {"object": {"kind": kind, "namespace": namespace, "name": name}}


def _lookup(caches: Caches, key: str) -> dict[str, object] | None:
    kind, namespace, name = parse_key(key)
    if kind not in caches.objects:
        return None  # an identity: cluster-scoped, its errors go to the log only
    return caches.object(kind, namespace, name)
