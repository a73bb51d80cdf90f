"""`captf bench scale --objects N`: the controller at scale, measured from outside.

One run, on its own API server: the controller idle on an empty cluster; then N
idle TerraformClusters in N/100 namespaces, each with its state Secret and 3
finished, accounted apply Jobs (plus `--unrelated-secrets` Secrets nobody reads);
the controller started over them and watched from outside until it settles; then
`--rate` spec changes per second for `--seconds`, each timed from the patch's
send time to the status write that answers it on an outside watch. Memory is
the controller process's own (RSS and its high-water mark from /proc); bytes per
cached Job are measured apart with tracemalloc on the same informer the
controller runs. The CPU seconds of the controller, kube-apiserver and etcd are
reported for the start-up and for the changes (`startup_cpu_s`, `changes_cpu_s`):
on one small machine they share the cores, and these say which one a phase
waited on. The last line printed is one JSON object with every figure."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from controller.bench.fixtures import create, namespace_body, populate, say
from controller.bench.peer import count_typed_jobs
from controller.bench.process import Controller, CpuMeter, Outside, Peak
from controller.core.basics.names import (
    CLUSTER,
    LABEL_UID,
)
from controller.dev.clusterapi import install_crds_only
from controller.io.api import JOBS, NAMESPACES, OBJECTS, resource_path
from controller.io.trimming import job_fields
from runtime.cache import Informer, Selection, label_index
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.errors import ApiError
from runtime.transport import MERGE_PATCH, Transport, open_transport

CLUSTERS = OBJECTS[CLUSTER]
PER_NAMESPACE = 100
JOBS_PER_OBJECT = 3
CONCURRENCY = 32
MERGE = MERGE_PATCH

CONTROLLER_NAMESPACE = "captf-system"
# Quiet this long and the controller has settled.
SETTLE_SECONDS = 3.0
MIB = 1 << 20


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(_bench(args))
    print(orjson.dumps(report).decode(), flush=True)
    return 0


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"objects": args.objects}
    with ApiServer() as server:
        server.install_crds(Path(args.crds))
        # The controller watches Cluster API's objects too: without their CRDs its caches
        # never sync. The bench's objects have no Cluster API owner, so they wait for one
        # (WaitingForOwner), idle as before.
        install_crds_only(server, server.workdir / "capi")
        kubeconfig = str(server.kubeconfig)
        async with open_transport(kubeconfig) as transport:
            await create(transport, resource_path(NAMESPACES), namespace_body(CONTROLLER_NAMESPACE))
            async with Controller(kubeconfig) as empty:
                await empty.ready()
                await asyncio.sleep(2)
                report["rss_mib_idle_empty"] = round(empty.rss_mib(), 1)
            started = time.monotonic()
            await populate(transport, args.objects, args.unrelated_secrets)
            say(f"fixtures in {time.monotonic() - started:.0f}s")
            report |= await _ingest(transport, kubeconfig)
            report |= await _controlled(transport, kubeconfig, args, server.pids)
    return report


# --- fixtures -------------------------------------------------------------------------------


# --- ingest: the Jobs into a cache, three ways ----------------------------------------------


async def _ingest(transport: Transport, kubeconfig: str) -> dict[str, Any]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    started = time.perf_counter()
    informer = Informer(
        transport,
        JOBS,
        clock=LoopClock(),
        selection=Selection(label_selector=LABEL_UID),
        indexers={"uid": label_index(LABEL_UID)},
        transform=job_fields,
    )
    async with informer:
        await informer.wait_synced()
        ours = time.perf_counter() - started
        gc.collect()
        after = tracemalloc.take_snapshot()
        count = len(informer.store)
        held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    tracemalloc.stop()
    del informer
    gc.collect()
    started = time.perf_counter()
    typed = await count_typed_jobs(kubeconfig, LABEL_UID)
    theirs = time.perf_counter() - started
    floor = await _floor(transport)
    say(f"ingest of {count} Jobs: ours {ours:.2f}s, kubernetes_asyncio {theirs:.2f}s ({typed})")
    return {
        "cached_jobs": count,
        "bytes_per_cached_job": round(held / max(count, 1)),
        "ingest_s": round(ours, 2),
        "ingest_vs_kubernetes_asyncio": round(theirs / ours, 2),
        "ingest_vs_floor": round(ours / floor, 2),
    }


async def _floor(transport: Transport) -> float:
    """Bare pages through the same session, decoded with orjson, the collector off, kept."""
    gc.disable()
    try:
        started = time.perf_counter()
        params = {"labelSelector": LABEL_UID, "limit": "500"}
        kept: list[Any] = []
        while True:
            page = await transport.request("GET", resource_path(JOBS), params=params)
            kept.extend(page.get("items") or ())
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return time.perf_counter() - started
            params = {"labelSelector": LABEL_UID, "limit": "500", "continue": token}
    finally:
        gc.enable()


# --- the controller, from outside -----------------------------------------------------------


async def _controlled(
    transport: Transport, kubeconfig: str, args: argparse.Namespace, server: dict[str, int]
) -> dict[str, Any]:
    outside = Outside()
    watch = Informer(transport, CLUSTERS, clock=LoopClock())
    watch.add_handler(outside)
    report: dict[str, Any] = {"cores": os.cpu_count()}
    async with watch, Controller(kubeconfig) as controller:
        cpu = CpuMeter(server | {"controller": controller.pid})
        await watch.wait_synced()
        peak = Peak(controller)
        sampler = asyncio.create_task(peak.sample())
        await _until(lambda: outside.statuses >= args.objects)
        report["startup_s"] = round(time.monotonic() - controller.started_at, 1)
        report["startup_cpu_s"] = cpu.lap()
        await _until(lambda: time.monotonic() - outside.last_write >= SETTLE_SECONDS)
        report["startup_writes"] = outside.writes
        gc_before = await controller.metric("captf_gc_longest_pause_seconds")
        report["rss_mib_settled"] = round(controller.rss_mib(), 1)
        say(f"settled: {report}")
        reconciles = await controller.metric("controller_runtime_reconcile_total")
        cpu.lap()
        changes = await _changes(transport, watch, outside, args.rate, args.seconds)
        report["changes_cpu_s"] = cpu.lap()
        await _until(lambda: not outside.pending or time.monotonic() - outside.last_write >= 10)
        await asyncio.sleep(SETTLE_SECONDS)
        done = await controller.metric("controller_runtime_reconcile_total") - reconciles
        sampler.cancel()
        latencies = sorted(outside.latencies)
        report |= {
            "rss_mib_peak": round(max(peak.highest, controller.peak_mib()), 1),
            "changes": changes,
            "changes_refused": outside.refused,
            "answered": len(latencies),
            "p50_change_ms": round(_quantile(latencies, 0.50), 1),
            "p99_change_ms": round(_quantile(latencies, 0.99), 1),
            "reconciles_per_change": round(done / max(changes, 1), 2),
            "max_gc_pause_ms": round(
                1000 * max(gc_before, await controller.metric("captf_gc_longest_pause_seconds")),
                1,
            ),
        }
    return report


async def _changes(
    transport: Transport, watch: Informer, outside: Outside, rate: float, seconds: float
) -> int:
    """`rate` spec changes a second for `seconds`, each on a random object."""
    keys = watch.store.keys()
    rng = random.Random(14)
    total = int(rate * seconds)
    start = time.monotonic()
    tasks: list[asyncio.Task[None]] = []

    async def change(n: int) -> None:
        key = rng.choice(keys)
        ns, name = key.split("/", 1)
        sent = time.monotonic()
        patch = {"spec": {"jobs": {"activeDeadlineSeconds": 3601 + n}}}
        try:
            answer = await transport.request(
                "PATCH", resource_path(CLUSTERS, ns, name), body=patch, content_type=MERGE
            )
        except (ApiError, TimeoutError, aiohttp.ClientError) as error:
            # An API server too busy to take the change: counted, not answered.
            outside.refused += 1
            say(f"change {n} not sent: {error!r}")
            return
        outside.sent(key, sent, int(answer["metadata"]["generation"]))

    for n in range(total):
        await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))
        tasks.append(asyncio.create_task(change(n)))
    await asyncio.gather(*tasks)
    return total


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # noqa: ASYNC110 -- polls state an informer's handler feeds
        await asyncio.sleep(0.1)


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]
