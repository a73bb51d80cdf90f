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
import socket
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from controller.bench.peer import count_typed_jobs
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
    LABEL_UID,
    MANAGED_BY,
)
from controller.core.basics.timefmt import format_time
from controller.core.decide.decision import Run
from controller.core.jobs.naming import job_name
from controller.core.plan.jobspec import build_job
from controller.core.spec.inputs import render
from controller.core.spec.policy import DEFAULT_IMAGES, read_policy
from controller.io.api import CONFIGMAPS, JOBS, NAMESPACES, OBJECTS, SECRETS, resource_path
from controller.io.trimming import job_fields
from runtime.cache import Informer, Selection, label_index
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.errors import ApiError
from runtime.transport import Transport, open_transport

CLUSTERS = OBJECTS[CLUSTER]
PER_NAMESPACE = 100
JOBS_PER_OBJECT = 3
CONCURRENCY = 32
MERGE = "application/merge-patch+json"
CONTROLLER_NAMESPACE = "captf-system"
# Quiet this long and the controller has settled.
SETTLE_SECONDS = 3.0
MIB = 1 << 20


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(_bench(args))
    print(orjson.dumps(report).decode(), flush=True)
    return 0


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"objects": args.objects}
    with ApiServer() as server:
        server.install_crds(Path(args.crds))
        kubeconfig = str(server.kubeconfig)
        async with open_transport(kubeconfig) as transport:
            await _create(transport, resource_path(NAMESPACES), _namespace(CONTROLLER_NAMESPACE))
            async with Controller(kubeconfig) as empty:
                await empty.ready()
                await asyncio.sleep(2)
                report["rss_mib_idle_empty"] = round(empty.rss_mib(), 1)
            started = time.monotonic()
            await _fixtures(transport, args.objects, args.unrelated_secrets)
            _say(f"fixtures in {time.monotonic() - started:.0f}s")
            report |= await _ingest(transport, kubeconfig)
            report |= await _controlled(transport, kubeconfig, args, server.pids)
    return report


# --- fixtures -------------------------------------------------------------------------------


def _namespace(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def _spec(deadline: int = 3600) -> dict[str, Any]:
    return {
        "source": {"configMapRef": {"name": "module"}},
        "variables": {"size": 1, "region": "eu-west-1"},
        "credentialsRef": {"name": "creds"},
        "jobs": {
            "image": DEFAULT_IMAGES[0],
            "successfulJobsHistoryLimit": JOBS_PER_OBJECT,
            "activeDeadlineSeconds": deadline,
        },
    }


MODULE = {"main.tf": 'variable "size" {}\nvariable "region" {}\n'}


async def _fixtures(transport: Transport, objects: int, unrelated: int) -> None:
    namespaces = [f"scale-{i:04}" for i in range((objects + PER_NAMESPACE - 1) // PER_NAMESPACE)]
    configmap = {"metadata": {"name": "module"}, "data": MODULE}
    creds = {"metadata": {"name": "creds"}, "stringData": {"TOKEN": "t"}}
    for ns in namespaces:
        await _create(transport, resource_path(NAMESPACES), _namespace(ns))
        await _create(transport, resource_path(CONFIGMAPS, ns), configmap)
        await _create(transport, resource_path(SECRETS, ns), creds)
    cm = {"module": {"data": MODULE}}
    inputs = render(_spec(), cm, {"creds": {"data": {"TOKEN": "dA=="}}})
    names = [(namespaces[i // PER_NAMESPACE], f"c{i:05}") for i in range(objects)]
    await _all(lambda item: _object(transport, item[0], item[1], inputs.hash), names, every=1000)
    filler = "x" * 2048
    await _all(
        lambda i: _create(
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
    obj = await _create(transport, resource_path(CLUSTERS, ns), body)
    state = {
        "metadata": {
            "name": f"{name}-state",
            "labels": {LABEL_NAME: name, LABEL_KIND: "TerraformCluster"} | MANAGED_BY,
            "annotations": {ANN_SERIAL: str(JOBS_PER_OBJECT), ANN_INPUTS_HASH: inputs_hash},
        },
        "stringData": {"terraform.tfstate": "{}"},
    }
    await _create(transport, resource_path(SECRETS, ns), state)
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
        created = await _create(transport, resource_path(JOBS, ns), job)
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


async def _create(transport: Transport, path: str, body: dict[str, Any]) -> dict[str, Any]:
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
            _say(f"{done} created")

    async with asyncio.TaskGroup() as group:
        for item in items:
            await limit.acquire()
            limit.release()
            group.create_task(one(item))


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
    _say(f"ingest of {count} Jobs: ours {ours:.2f}s, kubernetes_asyncio {theirs:.2f}s ({typed})")
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


class Controller:
    """`captf run` as a child process, with its RSS, its readiness and its metrics."""

    def __init__(self, kubeconfig: str) -> None:
        self._kubeconfig = kubeconfig
        self._port = _free_port()
        self._process: asyncio.subprocess.Process | None = None
        self._log = Path(os.environ.get("CAPTF_BENCH_LOG", "/tmp/captf-bench-controller.log"))
        self.started_at = 0.0

    async def __aenter__(self) -> Controller:
        argv = [
            sys.executable,
            "-m",
            "controller.cli.main",
            "run",
            "--kubeconfig",
            self._kubeconfig,
            "--no-leader-elect",
            "--controller-namespace",
            CONTROLLER_NAMESPACE,
            "--metrics-addr",
            f"127.0.0.1:{self._port}",
        ]
        # CAPTF_BENCH_SOURCE: run the controller from another source tree (an older
        # commit's, to measure a change against what it replaced).
        source = os.environ.get("CAPTF_BENCH_SOURCE")
        env = os.environ | ({"PYTHONPATH": source} if source else {})
        with self._log.open("ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                *argv, stdout=log, stderr=log, env=env, cwd=source or None
            )
        self.started_at = time.monotonic()
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._process is not None
        self._process.terminate()
        try:
            async with asyncio.timeout(30):
                await self._process.wait()
        except TimeoutError:
            self._process.kill()
            await self._process.wait()

    async def ready(self, within: float = 600.0) -> None:
        deadline = time.monotonic() + within
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                try:
                    async with session.get(f"http://127.0.0.1:{self._port}/readyz") as answer:
                        if answer.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        raise TimeoutError("the controller never became ready")

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def rss_mib(self) -> float:
        return self._status_kib("VmRSS") / 1024

    def peak_mib(self) -> float:
        return self._status_kib("VmHWM") / 1024

    def _status_kib(self, field_name: str) -> int:
        assert self._process is not None
        try:
            status = Path(f"/proc/{self._process.pid}/status").read_text()
        except FileNotFoundError:  # the process has ended
            return 0
        for line in status.splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1])
        return 0

    async def metric(self, name: str) -> float:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self._port}/metrics") as answer,
        ):
            text = await answer.text()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and not line.startswith("#")
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Outside:
    """An outside watch on every TerraformCluster: status writes, and changes answered."""

    statuses: int = 0
    writes: int = 0
    last_write: float = field(default_factory=time.monotonic)
    # key -> (send time, the generation the patch made); latency in ms once answered
    pending: dict[str, tuple[float, int]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    # key -> (the last status.observedGeneration seen, when)
    seen: dict[str, tuple[int, float]] = field(default_factory=dict)
    refused: int = 0

    def sent(self, key: str, at: float, generation: int) -> None:
        """A patch sent at `at` made `generation`; its answer may have been seen already."""
        observed, when = self.seen.get(key, (0, 0.0))
        if observed >= generation:
            self.latencies.append((when - at) * 1000)
        else:
            self.pending[key] = (at, generation)

    def __call__(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if old is None or new is None:
            return
        self.writes += 1
        self.last_write = time.monotonic()
        if "status" in new and "status" not in old:
            self.statuses += 1
        meta = new["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        observed = int((new.get("status") or {}).get("observedGeneration", 0))
        self.seen[key] = (observed, self.last_write)
        sent = self.pending.get(key)
        if sent is not None and observed >= sent[1]:
            del self.pending[key]
            self.latencies.append((self.last_write - sent[0]) * 1000)


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
        peak = _Peak(controller)
        sampler = asyncio.create_task(peak.sample())
        await _until(lambda: outside.statuses >= args.objects)
        report["startup_s"] = round(time.monotonic() - controller.started_at, 1)
        report["startup_cpu_s"] = cpu.lap()
        await _until(lambda: time.monotonic() - outside.last_write >= SETTLE_SECONDS)
        report["startup_writes"] = outside.writes
        gc_before = await controller.metric("captf_gc_longest_pause_seconds")
        report["rss_mib_settled"] = round(controller.rss_mib(), 1)
        _say(f"settled: {report}")
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


class CpuMeter:
    """CPU seconds (user and system) each process has used, lap by lap: where the time
    of a phase went, the controller's or the API server's (they share the machine)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = pids
        self._last = self._read()

    def lap(self) -> dict[str, float]:
        now = self._read()
        used = {name: round(now[name] - self._last.get(name, 0.0), 2) for name in now}
        self._last = now
        return used

    def _read(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self._pids.items()}


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc (0 once it has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return 0.0
    # The command name, in parentheses, may hold spaces: count fields after its end.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class _Peak:
    controller: Controller
    highest: float = 0.0

    async def sample(self) -> None:
        while True:
            self.highest = max(self.highest, self.controller.rss_mib())
            await asyncio.sleep(0.2)


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
            _say(f"change {n} not sent: {error!r}")
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
