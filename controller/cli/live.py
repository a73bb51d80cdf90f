"""Reads a decide snapshot from the cluster: the same objects the controller's caches hold."""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import Any

from controller.cli.snapshot_file import SnapshotError
from controller.core.basics.names import (
    API_VERSION,
    KINDS,
    LABEL_SCOPE,
    LABEL_UID,
    PLURALS,
    SCOPE_RUN_SLOT,
)
from controller.core.basics.timefmt import TimeFormatError, parse_time
from runtime.errors import ApiError
from runtime.transport import Transport, open_transport

Json = dict[str, Any]


def _kind_of(text: str) -> tuple[str, str]:
    kind, _, name = text.partition("/")
    by_lower = {k.lower(): k for k in KINDS} | {p: k for k, p in PLURALS.items()}
    by_lower |= {"tfc": KINDS[0], "tfmp": KINDS[1], "tfm": KINDS[2]}
    if not name or kind.lower() not in by_lower:
        raise SnapshotError(
            f"--live wants KIND/NAME with KIND one of {', '.join(KINDS)}; got {text!r}"
        )
    return by_lower[kind.lower()], name


def live_snapshot(args: argparse.Namespace) -> tuple[datetime, list[Json]]:
    kind, name = _kind_of(args.live)
    try:
        now = parse_time(args.now) if args.now else datetime.now(UTC)
    except TimeFormatError as err:
        raise SnapshotError(f"--now: {err}") from None
    try:
        objects = asyncio.run(_read(args.kubeconfig, kind, name, args.namespace))
    except ApiError as err:
        raise SnapshotError(f"reading {kind}/{name}: {err}") from None
    except OSError as err:
        raise SnapshotError(f"cannot reach the API server: {err}") from None
    return now, objects


async def _items(t: Transport, path: str, kind: str, **params: str) -> list[Json]:
    listing = await t.request("GET", path, params=params or None)
    api_version = listing.get("apiVersion", "v1")
    # List items carry no kind; the snapshot format wants it on every object.
    return [{"apiVersion": api_version, "kind": kind} | item for item in listing.get("items", [])]


async def _read(kubeconfig: str | None, kind: str, name: str, ns: str) -> list[Json]:
    async with open_transport(kubeconfig) as t:
        base = f"/apis/{API_VERSION}/namespaces/{ns}"
        obj = await t.request("GET", f"{base}/{PLURALS[kind]}/{name}")
        uid = obj["metadata"]["uid"]
        jobs = await _items(
            t, f"/apis/batch/v1/namespaces/{ns}/jobs", "Job", labelSelector=f"{LABEL_UID}={uid}"
        )
        secrets = await _items(t, f"/api/v1/namespaces/{ns}/secrets", "Secret")
        configmaps = await _items(t, f"/api/v1/namespaces/{ns}/configmaps", "ConfigMap")
        leases = await _items(t, f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", "Lease")
        slots = await _items(
            t,
            "/apis/coordination.k8s.io/v1/leases",
            "Lease",
            labelSelector=f"{LABEL_SCOPE}={SCOPE_RUN_SLOT}",
        )
        related: list[Json] = []
        for other in KINDS:
            related += await _items(t, f"{base}/{PLURALS[other]}", other)
        seen = {(x["metadata"].get("namespace"), x["metadata"]["name"]) for x in leases}
        slots = [
            s for s in slots if (s["metadata"].get("namespace"), s["metadata"]["name"]) not in seen
        ]
        others = [r for r in related if r["metadata"]["uid"] != uid]
        return [obj, *jobs, *secrets, *leases, *slots, *configmaps, *others]
