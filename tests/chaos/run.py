"""One chaos run from start to report.

The system: a real kube-apiserver and etcd; two `captf run` replicas, leader-elected,
each reaching the API server through its own fault-injecting proxy and restarted one
second after any exit; the Job runner; the workload. The harness watches the API server
directly (never through a proxy) and injects faults until the budget is spent, then
heals everything, lets every object succeed, and waits for convergence."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import re
import socket
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from controller.dev.clusterapi import install_crds_only
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import open_transport
from tests.chaos import report
from tests.chaos.faults import Faults
from tests.chaos.jobrunner import RUNNERS, JobRunner, Setting
from tests.chaos.observer import Observer
from tests.chaos.processes import Replica, captf
from tests.chaos.proxy import Proxy
from tests.chaos.workload import Workload

log = logging.getLogger("chaos")
NAMESPACE = "chaos"
CONTROLLER_NAMESPACE = "chaos-system"
CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
SAMPLES = re.compile(r"^captf_job_attempts_count\{[^}]*\} ([0-9.e+]+)$", re.MULTILINE)
HANDOVER_TARGETS = {"sigterm": 5.0, "kill9": 20.0}


@dataclass(frozen=True)
class Config:
    faults: int = 1000
    objects: int = 50
    max_concurrent_runs: int = 5
    time_scale: float = 60.0
    rate: float = 1.0
    fail_ratio: float = 0.3
    restarts: int | None = None  # API server restarts; default: one per 100 faults, 2 at least
    converge_within: float = 300.0
    runner: str = "node"
    seed: int = 11
    workdir: Path = Path(".local/chaos")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def proxied_kubeconfig(source: Path, port: int, dest: Path) -> Path:
    config = yaml.safe_load(source.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    dest.write_text(yaml.safe_dump(config))
    return dest


def run(cfg: Config) -> Json:
    """Starts the API server, runs everything, returns the report."""
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    with ApiServer(controller_manager=True) as server:
        server.install_crds(CRDS)
        # Cluster API's CRDs, without its manager: the workload plays its part.
        install_crds_only(server, server.workdir / "capi")
        return asyncio.run(_run(cfg, server))


async def _run(cfg: Config, server: ApiServer) -> Json:
    began = time.monotonic()
    rng = random.Random(cfg.seed)
    upstream_port = int(server.url.rsplit(":", 1)[1])
    async with open_transport(str(server.kubeconfig)) as transport:
        for ns in (NAMESPACE, CONTROLLER_NAMESPACE):
            await transport.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
        workload = Workload(transport, NAMESPACE, cfg.objects, rng)
        observer = Observer(NAMESPACE, CONTROLLER_NAMESPACE)
        runner: JobRunner = RUNNERS[cfg.runner]()
        setting = Setting(
            server.kubeconfig, NAMESPACE, CONTROLLER_NAMESPACE, cfg.time_scale, cfg.workdir
        )
        async with (
            observer.running(transport),
            Proxy("127.0.0.1", upstream_port) as proxy_a,
            Proxy("127.0.0.1", upstream_port) as proxy_b,
            # Started before the controllers: it records the scaled timeline's origin.
            runner.running(setting),
            contextlib.AsyncExitStack() as stack,
        ):
            proxies = {"a": proxy_a, "b": proxy_b}
            replicas = {}
            for name, proxy in proxies.items():
                kubeconfig = proxied_kubeconfig(
                    server.kubeconfig, proxy.port, cfg.workdir / f"kubeconfig-{name}"
                )
                replica = Replica(
                    name, _controller_argv(cfg, kubeconfig, port := free_port()), cfg.workdir, port
                )
                replicas[name] = await stack.enter_async_context(replica.running())
            await workload.create()
            initial = await _converge(observer, cfg.converge_within)
            samples: dict[tuple[str, int], float] = {}
            scraper = asyncio.create_task(_scrape_forever(replicas, samples))

            async def restart_apiserver() -> float:
                t0 = time.monotonic()
                await asyncio.to_thread(server.restart_apiserver)
                return time.monotonic() - t0

            faults = Faults(
                observer=observer,
                replicas=replicas,
                proxies=proxies,
                workload=workload,
                restart_apiserver=restart_apiserver,
                rng=rng,
                budget=cfg.faults,
                rate=cfg.rate,
                fail_ratio=cfg.fail_ratio,
                restarts=cfg.restarts if cfg.restarts is not None else max(2, cfg.faults // 100),
            )
            faults_began = time.monotonic()
            await faults.run()
            faulting = time.monotonic() - faults_began
            for proxy in proxies.values():
                proxy.heal()
            await _retry(workload.all_succeed)
            final = await _converge(observer, cfg.converge_within)
            await _scrape(replicas, samples)
            scraper.cancel()
            _dump(cfg.workdir, observer)
            leases_at_end = [
                f"{x.namespace}/{x.name}={','.join(sorted(x.claims))}"
                for x in observer.held_leases()
            ]
            return _report(
                cfg,
                observer,
                faults,
                replicas,
                samples,
                leases_at_end,
                runner,
                initial=initial,
                final=final,
                faulting=faulting,
                began=began,
            )


def _dump(workdir: Path, observer: Observer) -> None:
    """Every Job and Event record, one JSON line each, for a post-mortem."""
    with (workdir / "observed.jsonl").open("wb") as out:
        for job in observer.jobs.values():
            row = dataclasses.asdict(job) | {"last": None, "record": "job"}
            out.write(orjson.dumps(row) + b"\n")
        for event in observer.events.values():
            out.write(orjson.dumps(dataclasses.asdict(event) | {"record": "event"}) + b"\n")


def _controller_argv(cfg: Config, kubeconfig: Path, metrics_port: int) -> list[str]:
    # All namespaces, as installed: with --namespace the Lease cache covers only that
    # namespace, and run slots in the controller's own namespace would never be released.
    return captf(
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--controller-namespace",
        CONTROLLER_NAMESPACE,
        "--max-concurrent-runs",
        str(cfg.max_concurrent_runs),
        "--metrics-addr",
        f"127.0.0.1:{metrics_port}",
        "--time-scale",
        f"{cfg.time_scale:g}",
    )


async def _retry(step: Any, attempts: int = 30) -> None:
    for _ in range(attempts):
        try:
            await step()
            return
        except Exception as err:
            log.warning("retrying after %r", err)
            await asyncio.sleep(2)


async def _converge(observer: Observer, within: float) -> tuple[float, list[str]]:
    """(seconds until every object converged, or `within`; the ones that did not)."""
    t0 = time.monotonic()
    while True:
        running = {j.owner for j in observer.running_jobs()}
        behind = sorted(
            f"{o['kind']}/{o['metadata']['name']}"
            for o in observer.objects.values()
            if not report.converged(o, running)
        )
        took = time.monotonic() - t0
        if not behind or took >= within:
            return round(took, 1), behind
        await asyncio.sleep(1)


async def _scrape(replicas: dict[str, Replica], samples: dict[tuple[str, int], float]) -> None:
    for name, replica in replicas.items():
        text = await replica.metrics()
        inc = replica.current
        if text is not None and inc is not None:
            samples[(name, inc.pid)] = sum(float(v) for v in SAMPLES.findall(text))


async def _scrape_forever(
    replicas: dict[str, Replica], samples: dict[tuple[str, int], float]
) -> None:
    while True:
        await _scrape(replicas, samples)
        await asyncio.sleep(1)


def _report(
    cfg: Config,
    observer: Observer,
    faults: Faults,
    replicas: dict[str, Replica],
    samples: dict[tuple[str, int], float],
    leases_at_end: list[str],
    runner: JobRunner,
    *,
    initial: tuple[float, list[str]],
    final: tuple[float, list[str]],
    faulting: float,
    began: float,
) -> Json:
    owners = {uid: report.owner_of(obj) for uid, obj in observer.objects.items()}
    jobs = list(observer.jobs.values())
    same, family = report.overlaps(jobs, owners)
    accounting = report.accounting(jobs, observer.events.values())
    accounted = sum(1 for j in jobs if j.accounted)
    exits: Counter[str] = Counter()
    tracebacks = 0
    for replica in replicas.values():
        for inc in replica.incarnations:
            if inc.exit_code is not None:
                exits[str(inc.exit_code)] += 1
            if inc.log.exists():
                tracebacks += inc.log.read_text(errors="replace").count("Traceback (most recent")
    peak, at_peak = report.max_concurrent(jobs)
    handovers = {}
    for kind, target in HANDOVER_TARGETS.items():
        timed = [h for h in faults.handovers if h.fault.startswith(kind)]
        slow = [h for h in timed if h.seconds is None or h.seconds > target]
        handovers[kind] = report.seconds_summary([h.seconds for h in timed], target) | {
            "slow_examples": [f"{h.fault} at {h.at}: {h.seconds}" for h in slow][: report.EXAMPLES]
        }
    return {
        "faults": sum(faults.counts.values()),
        "faults_by_kind": dict(sorted(faults.counts.items())),
        "fault_step_errors": dict(faults.errors),
        "objects": len(observer.objects),
        "runner": runner.name,
        "max_concurrent_runs": cfg.max_concurrent_runs,
        "time_scale": cfg.time_scale,
        "jobs": {
            "total": len(jobs),
            "complete": sum(1 for j in jobs if j.ended == "Complete"),
            "failed": sum(1 for j in jobs if j.ended == "Failed"),
            "deleted_running": sum(1 for j in jobs if j.ended == "deleted"),
            "running_at_end": sum(1 for j in jobs if not j.ended),
            "inexact": sum(1 for j in jobs if not j.exact),
        },
        "overlaps": len(same),
        "cluster_member_overlaps": len(family),
        "overlap_examples": (same + family)[: report.EXAMPLES],
        "max_running_jobs": peak,
        "run_slot_overuse": max(0, peak - cfg.max_concurrent_runs),
        "overuse_examples": at_peak if peak > cfg.max_concurrent_runs else [],
        "leases_held_at_end": len(leases_at_end),
        "leases_held_examples": leases_at_end[: report.EXAMPLES],
        "accounting": accounting
        | {"metric_samples": int(sum(samples.values())), "jobs_accounted": accounted},
        "unconverged": len(final[1]),
        "unconverged_examples": final[1][: report.EXAMPLES],
        "converge_seconds": {
            "initial": initial[0],
            "after_faults": final[0],
            "bound": cfg.converge_within,
        },
        "handover_seconds": handovers,
        "controller_exits": dict(sorted(exits.items())),
        "controller_tracebacks": tracebacks,
        "apiserver_restart_seconds": [round(s, 1) for s in faults.apiserver_restart_seconds],
        "seconds": {"faulting": round(faulting, 1), "total": round(time.monotonic() - began, 1)},
    }
