"""`captf get [-A] [-n NS] [KIND]`: every object, what it waits for, and why it last failed."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import defaultdict
from datetime import datetime
from typing import Any

import orjson
import yaml

from controller.cli.people import rows, table
from controller.cli.people.common import run_command
from controller.cli.people.kinds import kind_of
from controller.core.basics.names import API_VERSION, KINDS, LABEL_UID, PLURALS
from controller.core.basics.redact import Redactor
from controller.core.jobs.sensitive import job_redactor
from runtime.clock import scaled_time, wall_clock
from runtime.errors import ApiError
from runtime.timeorigin import shared_origin
from runtime.transport import Transport, open_transport

Json = dict[str, Any]


def _get(args: argparse.Namespace) -> int:
    kinds = [kind_of(args.kind)] if args.kind else list(KINDS)
    namespace = None if args.all_namespaces else args.namespace
    objects, jobs, secrets, now = asyncio.run(_read(args, kinds, namespace))
    found = [
        rows.row_of(o, jobs.get(o["metadata"].get("uid", ""), []), _redactor_of(secrets))
        for o in objects
    ]
    found.sort(key=lambda r: (r.namespace, KINDS.index(r.kind), r.name))
    if args.output in ("json", "yaml"):
        items = [rows.to_json(r, now) for r in found]
        sys.stdout.write(_dump({"items": items}, args.output))
    elif not found:
        where = "any namespace" if namespace is None else f"namespace {namespace}"
        print(f"No CAPTF objects found in {where}.", file=sys.stderr)
    else:
        sys.stdout.write(
            table.render(found, now, namespaces=namespace is None, kinds=args.kind is None)
        )
    return 0


def _redactor_of(secrets: dict[tuple[str, str], Json]) -> rows.RedactorOf:
    """A Job's Redactor from the Secrets of its namespace, as the controller builds it."""

    def of(job: Json) -> Redactor:
        ns = job["metadata"].get("namespace", "")
        return job_redactor(job, {name: s for (n, name), s in secrets.items() if n == ns})

    return of


async def _read(
    args: argparse.Namespace, kinds: list[str], namespace: str | None
) -> tuple[list[Json], dict[str, list[Json]], dict[tuple[str, str], Json], datetime]:
    async with open_transport(args.kubeconfig) as t:
        objects = [obj for kind in kinds for obj in await _list(t, namespace, kind)]
        jobs, secrets = await _jobs_by_uid(t, namespace), await _secrets(t, namespace)
        return objects, jobs, secrets, await _now(t, args)


async def _now(t: Transport, args: argparse.Namespace) -> datetime:
    """The controller's time: the wall clock, or, for a controller run at --time-scale K,
    its scaled timeline from the origin recorded in the API server."""
    wall = wall_clock()
    if args.time_scale == 1.0:
        return wall
    from controller.io.main import TIME_ORIGIN

    origin = await shared_origin(t, args.controller_namespace, TIME_ORIGIN, wall)
    return scaled_time(origin, wall, args.time_scale)


async def _secrets(t: Transport, namespace: str | None) -> dict[tuple[str, str], Json]:
    """The Secrets the messages are redacted with. Someone not allowed to read Secrets
    sees the messages as the runner wrote them, already redacted once."""
    try:
        listing = await t.request("GET", f"{_base('v1', namespace)}/secrets")
    except ApiError as err:
        if err.status in (401, 403):
            return {}
        raise
    return {
        (s["metadata"].get("namespace", ""), s["metadata"]["name"]): s
        for s in listing.get("items", [])
    }


def _dump(doc: Json, output: str) -> str:
    if output == "json":
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _base(group_version: str, namespace: str | None) -> str:
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{root}/namespaces/{namespace}" if namespace else root


async def _list(t: Transport, namespace: str | None, kind: str) -> list[Json]:
    listing = await t.request("GET", f"{_base(API_VERSION, namespace)}/{PLURALS[kind]}")
    # List items carry no kind.
    return [{"kind": kind} | item for item in listing.get("items", [])]


async def _jobs_by_uid(t: Transport, namespace: str | None) -> dict[str, list[Json]]:
    path = f"{_base('batch/v1', namespace)}/jobs"
    listing = await t.request("GET", path, params={"labelSelector": LABEL_UID})
    out: defaultdict[str, list[Json]] = defaultdict(list)
    for job in listing.get("items", []):
        out[job["metadata"]["labels"][LABEL_UID]].append(job)
    return out


run = run_command("get", _get)
