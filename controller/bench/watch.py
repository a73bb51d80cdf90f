"""`captf bench watch`: our reflector and cache against kubernetes_asyncio on the same events.

Setup: N suspended Jobs in one namespace (nothing runs them), then one burst
that label-patches every Job, between two resourceVersions. Each round then
makes both clients do what a reflector does from the revision before the
burst: list at exactly that revision, then watch from it until the N burst
events are in the cache. Ours: raw lines parsed with orjson into the
indexed `Store`. Theirs: `BatchV1Api.list_namespaced_job` and `watch.Watch`
into V1Job models kept in a dict. Rounds alternate and the best time of each
client is reported. Bytes per cached Job are measured apart, with tracemalloc.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from controller.bench.peer import TypedJobs, open_typed_jobs
from controller.core.basics.names import (
    ANN_RETRY,
    LABEL_BENCH,
    LABEL_BENCH_BURST,
    LABEL_OP,
    LABEL_UID,
)
from controller.io.api import JOBS, NAMESPACES, resource_path
from runtime.cache import Store, Watched, label_index, list_all, owner_uid_index
from runtime.cache.watchstream import watch_once
from runtime.errors import ApiError
from runtime.transport import MERGE_PATCH, Transport, open_transport

ROUNDS = 3
# Requests in flight while creating and patching: enough to keep the API server busy.
CONCURRENCY = 32
DEFAULT_KUBECONFIG = Path(".local/kubeconfig")
BENCH_LABEL = LABEL_BENCH


@dataclass
class Timing:
    """Wall-clock seconds per phase, and this process's CPU seconds for the same phases.

    On a small machine the API server shares the cores and can be the slower side of a
    stream; CPU time is the client's own cost whoever sets the pace."""

    list_seconds: float
    watch_seconds: float
    list_cpu: float
    watch_cpu: float

    def __str__(self) -> str:
        return (
            f"list {self.list_seconds:.2f}s ({self.list_cpu:.2f}s cpu), "
            f"watch {self.watch_seconds:.2f}s ({self.watch_cpu:.2f}s cpu)"
        )


class _Stopwatch:
    def __init__(self) -> None:
        self.marks = [(time.perf_counter(), time.process_time())]

    def mark(self) -> None:
        self.marks.append((time.perf_counter(), time.process_time()))

    def timing(self) -> Timing:
        (w0, c0), (w1, c1), (w2, c2) = self.marks
        return Timing(w1 - w0, w2 - w1, c1 - c0, c2 - c1)


def run(args: argparse.Namespace) -> int:
    kubeconfig = args.kubeconfig
    if kubeconfig is None and DEFAULT_KUBECONFIG.exists():
        kubeconfig = str(DEFAULT_KUBECONFIG)
    result = asyncio.run(_bench(args.objects, args.namespace, kubeconfig))
    print(orjson.dumps(result).decode(), flush=True)
    return 0


async def _bench(count: int, namespace: str, kubeconfig: str | None) -> dict[str, Any]:
    async with open_transport(kubeconfig) as transport:
        started = time.perf_counter()
        await _ensure_jobs(transport, namespace, count)
        created = time.perf_counter()
        before, after = await _burst(transport, namespace)
        patched = time.perf_counter()
        _say(f"burst of {count} patches: resourceVersion {before} -> {after}")
        async with open_typed_jobs(kubeconfig, namespace) as typed:
            ours: list[Timing] = []
            theirs: list[Timing] = []
            for round_ in range(ROUNDS):
                ours.append(await _ours(transport, namespace, before, count))
                theirs.append(await _theirs(typed, before, count))
                _say(f"round {round_ + 1}: ours {ours[-1]}, kubernetes_asyncio {theirs[-1]}")
            raw = await _transport_only(transport, namespace, before, count)
            our_bytes = await _bytes_per_job(
                lambda: _our_cache(transport, namespace, before), count
            )
            their_bytes = await _bytes_per_job(lambda: _their_cache(typed, before), count)
    return _report(
        count,
        ours,
        theirs,
        raw,
        our_bytes,
        their_bytes,
        {"create": created - started, "burst": patched - created},
    )


def _say(message: str) -> None:
    print(f"bench watch: {message}", file=sys.stderr, flush=True)


def _job(index: int) -> dict[str, Any]:
    """A Job shaped like the controller's: labels, an owner-like uid, a runner container."""
    name = f"bench-{index:06d}"
    container = {
        "name": "runner",
        "image": "captf-runner:dev",
        "args": ["apply", "--workspace", name],
        "env": [{"name": f"CAPTF_VAR_{n}", "value": f"value-{n}-{index}"} for n in range(4)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {BENCH_LABEL: "watch", LABEL_UID: f"uid-{index:06d}"},
            "annotations": {ANN_RETRY: "1", LABEL_OP: "apply"},
        },
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


async def _ensure_jobs(transport: Transport, namespace: str, count: int) -> None:
    try:
        await transport.request(
            "POST", resource_path(NAMESPACES), body={"metadata": {"name": namespace}}
        )
    except ApiError as error:
        if error.status != 409:
            raise
    path = resource_path(JOBS, namespace)
    existing = await list_all(
        transport, path, resource_version="", selectors={"labelSelector": f"{BENCH_LABEL}=watch"}
    )
    have = {obj["metadata"]["name"] for obj in existing.objects}
    missing = [_job(i) for i in range(count) if f"bench-{i:06d}" not in have]
    extra = sorted(have - {f"bench-{i:06d}" for i in range(count)})
    _say(f"{len(have)} Jobs exist; creating {len(missing)}, deleting {len(extra)}")
    await _all(lambda job: transport.request("POST", path, body=job), missing)
    await _all(lambda name: transport.request("DELETE", f"{path}/{name}"), extra)


async def _burst(transport: Transport, namespace: str) -> tuple[str, str]:
    """Label-patch every bench Job once; the resourceVersions just before and just after."""
    path = resource_path(JOBS, namespace)
    selectors = {"labelSelector": f"{BENCH_LABEL}=watch"}
    listed = await list_all(transport, path, resource_version="", selectors=selectors)
    stamp = str(time.time_ns())

    def one(obj: dict[str, Any], value: str = stamp) -> Awaitable[dict[str, Any]]:
        url = f"{path}/{obj['metadata']['name']}"
        patch = {"metadata": {"labels": {LABEL_BENCH_BURST: value}}}
        return transport.request("PATCH", url, body=patch, content_type=MERGE_PATCH)

    # The API server's watch cache answers 410 for a version older than its oldest
    # Job event. A marker write makes "before" itself a Job event the cache holds.
    marker = await one(listed.objects[0], value=f"{stamp}-marker")
    await _all(one, listed.objects)
    after = await transport.request("GET", path, params={"limit": "1"})
    return marker["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"]


async def _all(call: Callable[[Any], Awaitable[Any]], items: list[Any]) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(item: Any) -> None:
        async with gate:
            await call(item)

    async with asyncio.TaskGroup() as group:
        for item in items:
            group.create_task(one(item))


def _watch_params(version: str) -> dict[str, str]:
    return {
        "watch": "true",
        "resourceVersion": version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "300",
    }


async def _our_cache(transport: Transport, namespace: str, version: str) -> Store:
    """The list half of a reflector: the snapshot at `version`, one page, into an indexed store."""
    store = Store({"by-uid": label_index(LABEL_UID), "by-owner": owner_uid_index})
    listed = await list_all(
        transport,
        resource_path(JOBS, namespace),
        resource_version=version,
        # resourceVersionMatch rides along with the selectors; one page, as the peer lists.
        selectors={"resourceVersionMatch": "Exact"},
        page_size=1_000_000,
    )
    store.replace(listed.objects, listed.resource_version)
    return store


async def _ours(transport: Transport, namespace: str, version: str, count: int) -> Timing:
    watch = _Stopwatch()
    store = await _our_cache(transport, namespace, version)
    watch.mark()
    seen = 0
    events = watch_once(
        transport, resource_path(JOBS, namespace), params=_watch_params(version), silence=330.0
    )
    async for delta in events:
        store.reached(delta.resource_version)
        if isinstance(delta, Watched):
            store.upsert(delta.object)
            seen += 1
            if seen == count:
                break
    await events.aclose()
    watch.mark()
    return watch.timing()


async def _their_cache(typed: TypedJobs, version: str) -> dict[str, Any]:
    items, _ = await typed.list(resource_version=version, exact=True)
    return {f"{job.metadata.namespace}/{job.metadata.name}": job for job in items}


async def _theirs(typed: TypedJobs, version: str, count: int) -> Timing:
    watch = _Stopwatch()
    cache = await _their_cache(typed, version)
    watch.mark()
    async for event in typed.watch(resource_version=version, count=count):
        job = event["object"]
        cache[f"{job.metadata.namespace}/{job.metadata.name}"] = job
    watch.mark()
    return watch.timing()


async def _transport_only(transport: Transport, namespace: str, version: str, count: int) -> float:
    """Seconds to receive the burst's lines without decoding them: the server's side of the cost."""
    path = resource_path(JOBS, namespace)
    started = time.perf_counter()
    seen = 0
    async with transport.stream(path, params=_watch_params(version)) as lines:
        async for line in lines:
            seen += b'"MODIFIED"' in line[:20]
            if seen == count:
                break
    return time.perf_counter() - started


async def _bytes_per_job(build: Callable[[], Awaitable[object]], count: int) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        cache = await build()
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    del cache
    return used / count


def _report(
    count: int,
    ours: list[Timing],
    theirs: list[Timing],
    raw_seconds: float,
    our_bytes: float,
    their_bytes: float,
    setup: dict[str, float],
) -> dict[str, Any]:
    def best(timings: list[Timing]) -> Timing:
        return Timing(
            min(t.list_seconds for t in timings),
            min(t.watch_seconds for t in timings),
            min(t.list_cpu for t in timings),
            min(t.watch_cpu for t in timings),
        )

    our, their = best(ours), best(theirs)
    ours_rate = 2 * count / (our.list_seconds + our.watch_seconds)
    theirs_rate = 2 * count / (their.list_seconds + their.watch_seconds)
    return {
        "bench": "watch",
        "objects": count,
        "rounds": len(ours),
        "ours_events_per_s": round(ours_rate),
        "kubernetes_asyncio_events_per_s": round(theirs_rate),
        "ratio": round(ours_rate / theirs_rate, 2),
        "list": {
            **_pair(count / our.list_seconds, count / their.list_seconds),
            **_cpu(our.list_cpu / count, their.list_cpu / count),
        },
        "watch": {
            **_pair(count / our.watch_seconds, count / their.watch_seconds),
            **_cpu(our.watch_cpu / count, their.watch_cpu / count),
            "transport_only_per_s": round(count / raw_seconds),
        },
        "bytes_per_cached_job": {
            "ours": round(our_bytes),
            "kubernetes_asyncio": round(their_bytes),
            "ratio": round(their_bytes / our_bytes, 2),
        },
        "setup_seconds": {name: round(seconds, 1) for name, seconds in setup.items()},
    }


def _cpu(ours: float, theirs: float) -> dict[str, float]:
    """Client CPU microseconds per object or event."""
    return {
        "ours_cpu_us": round(ours * 1e6, 1),
        "kubernetes_asyncio_cpu_us": round(theirs * 1e6, 1),
        "cpu_ratio": round(theirs / ours, 2),
    }


def _pair(ours: float, theirs: float) -> dict[str, float]:
    return {
        "ours_per_s": round(ours),
        "kubernetes_asyncio_per_s": round(theirs),
        "ratio": round(ours / theirs, 2),
    }
