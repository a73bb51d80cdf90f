"""`captf bench state`: what a state's size costs (docs/state.md).

On its own API server: (1) one state each of 1 KiB, 5 MiB and 40 MiB written as the
runner writes it (controller/runner/state.py: laid out, parts first, the switch), twice
(a first write, then a change that backs the first up): the wall time of each write and
the bytes it stored in Secrets (decoded data: manifest, inline body, parts); (2) the
controller's RSS over `--objects` idle TerraformClusters (the `bench scale` fixtures)
whose states are 1 KiB, and again on a fresh API server with states of 5 MiB: the
controller caches a state's metadata and outputs only, so the two should be within 10%.
States are `terraform_data`-like JSON with random hex (gzip halves it at best). The time
of a tofu apply of such states is the e2e test's (tests/e2e/test_state_size_e2e.py).
The last line printed is one JSON object with every figure."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import orjson

from controller.bench.fixtures import create, namespace_body, populate, say
from controller.bench.process import Controller
from controller.core.basics.names import ANN_INPUTS_HASH, CLUSTER, state_secret_name
from controller.dev.clusterapi import install_crds_only
from controller.io.api import NAMESPACES, SECRETS, resource_path
from controller.runner.kube import TransportKube
from controller.runner.state import StateStore
from runtime.envtest import ApiServer
from runtime.transport import Transport, open_transport

KIB, MIB = 1 << 10, 1 << 20
SIZES = {"1KiB": KIB, "5MiB": 5 * MIB, "40MiB": 40 * MIB}
CONTROLLER_NAMESPACE = "captf-system"
SETTLE_SECONDS = 10.0


def body(size: int, serial: int) -> bytes:
    """A state of about `size` bytes: one resource whose input is random hex."""
    blob = os.urandom(max(size - 200, 2) // 2).hex()
    resource = {"type": "terraform_data", "name": "big", "instances": [{"attributes": blob}]}
    doc = {"version": 4, "serial": serial, "lineage": "bench", "resources": [resource]}
    return json.dumps(doc).encode()


def run(args: argparse.Namespace) -> int:
    report = asyncio.run(_bench(args))
    print(orjson.dumps(report).decode(), flush=True)
    return 0


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"objects": args.objects}
    with ApiServer() as server:
        async with open_transport(str(server.kubeconfig)) as transport:
            report["writes"] = await _writes(transport)
    for label in ("1KiB", "5MiB"):
        report[f"rss_mib_{label}"] = await _rss(args, SIZES[label])
    small, large = report["rss_mib_1KiB"], report["rss_mib_5MiB"]
    report["rss_ratio_5MiB_to_1KiB"] = round(large / small, 3) if small else None
    return report


async def _writes(transport: Transport) -> dict[str, Any]:
    await create(transport, resource_path(NAMESPACES), namespace_body("bench-writes"))
    out: dict[str, Any] = {}
    for label, size in SIZES.items():
        store = _store(transport, "bench-writes", f"w{label.lower()}")
        figures = []
        for serial in (1, 2):
            before = await _stored(transport, "bench-writes")
            data = body(size, serial)
            started = time.perf_counter()
            await store.save(await store.load(), data, "h")
            seconds = time.perf_counter() - started
            written = await _stored(transport, "bench-writes") - before
            figures.append(
                {"state_bytes": len(data), "seconds": round(seconds, 2), "stored_bytes": written}
            )
        out[label] = {"first": figures[0], "change": figures[1]}
        say(f"{label}: first write {figures[0]['seconds']}s, a change {figures[1]['seconds']}s")
    return out


def _store(transport: Transport, ns: str, name: str) -> StateStore:
    return StateStore(
        TransportKube(transport, ns),
        secret_name=state_secret_name(ns, CLUSTER, name),
        object_name=name,
        object_kind=CLUSTER,
    )


async def _stored(transport: Transport, ns: str) -> int:
    """Bytes of Secret data held in `ns` (decoded), which the writes only add to or keep."""
    listed = await transport.request("GET", resource_path(SECRETS, ns))
    return sum(
        len(base64.b64decode(value))
        for item in listed.get("items") or []
        for value in (item.get("data") or {}).values()
    )


async def _rss(args: argparse.Namespace, size: int) -> float:
    """The controller's RSS, settled, over `args.objects` objects with states of `size`."""
    with ApiServer() as server:
        server.install_crds(Path(args.crds))
        install_crds_only(server, server.workdir / "capi")
        kubeconfig = str(server.kubeconfig)
        async with open_transport(kubeconfig) as transport:
            await create(transport, resource_path(NAMESPACES), namespace_body(CONTROLLER_NAMESPACE))
            await populate(transport, args.objects, 0)
            for i in range(args.objects):
                ns, name = f"scale-{i // 100:04}", f"c{i:05}"
                # The fixture's state is `{}`: replaced by one of `size`, inputs hash kept.
                path = resource_path(SECRETS, ns, state_secret_name(ns, CLUSTER, name))
                fixture = await transport.request("GET", path)
                await transport.request("DELETE", path)
                hashed = (fixture["metadata"].get("annotations") or {}).get(ANN_INPUTS_HASH)
                await _store(transport, ns, name).save(None, body(size, 4), hashed)
            say(f"{args.objects} states of {size} bytes written")
            async with Controller(kubeconfig) as controller:
                await controller.ready()
                await asyncio.sleep(SETTLE_SECONDS)
                return round(controller.rss_mib(), 1)
