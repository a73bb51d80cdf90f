"""`captf get [-A] [-n NS] [KIND]`: every object, what it waits for, and why it last failed."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import defaultdict
from datetime import datetime

import orjson
import yaml

from controller.cli.kinds import kind_of
from controller.cli.live import Source, listed
from controller.cli.live_transport import LiveTransport
from controller.cli.people import rows, table
from controller.cli.people.common import run_command
from controller.core.basics.names import KINDS, LABEL_UID
from controller.core.basics.redact import Redactor
from controller.core.jobs.sensitive import job_redactor
from controller.io import api
from runtime.errors import ApiError
from runtime.jsonobj import Json


def _get(args: argparse.Namespace) -> int:
    kinds = [kind_of(args.kind)] if args.kind else list(KINDS)
    source = Source(
        kubeconfig=args.kubeconfig,
        namespace=None if args.all_namespaces else args.namespace,
        time_scale=args.time_scale,
        controller_namespace=args.controller_namespace,
        request_timeout=args.request_timeout,
    )
    objects, jobs, secrets, now = asyncio.run(_read(source, kinds))
    found = [
        rows.row_of(o, jobs.get(o["metadata"].get("uid", ""), []), _redactor_of(secrets))
        for o in objects
    ]
    found.sort(key=lambda r: (r.namespace, KINDS.index(r.kind), r.name))
    namespace = source.namespace
    if args.output in ("json", "yaml"):
        items = [rows.to_json(r, now) for r in found]
        sys.stdout.write(_dump({"items": items}, args.output))
    elif not found:
        where = "any namespace" if namespace is None else f"namespace {namespace}"
        print(f"No CAPTF objects found in {where}.", file=sys.stderr)
    else:
        sys.stdout.write(
            table.render(
                found,
                now,
                namespaces=namespace is None,
                kinds=args.kind is None,
                wide=args.output == "wide",
            )
        )
    return 0


def _redactor_of(secrets: dict[tuple[str, str], Json]) -> rows.RedactorOf:
    """A Job's Redactor from the Secrets of its namespace, as the controller builds it."""

    def of(job: Json) -> Redactor:
        ns = job["metadata"].get("namespace", "")
        return job_redactor(job, {name: s for (n, name), s in secrets.items() if n == ns})

    return of


async def _read(
    source: Source, kinds: list[str]
) -> tuple[list[Json], dict[str, list[Json]], dict[tuple[str, str], Json], datetime]:
    ns = source.namespace or None  # an empty -n, as -A, lists every namespace
    async with source.open() as t:
        objects = [obj for kind in kinds for obj in await listed(t, api.OBJECTS[kind], kind, ns)]
        jobs, secrets = await _jobs_by_uid(t, ns), await _secrets(t, ns)
        return objects, jobs, secrets, await source.now(t)


async def _secrets(t: LiveTransport, namespace: str | None) -> dict[tuple[str, str], Json]:
    """The Secrets the messages are redacted with. Someone not allowed to read Secrets
    sees the messages as the runner wrote them, already redacted once."""
    try:
        found = await listed(t, api.SECRETS, "Secret", namespace)
    except ApiError as err:
        if err.status in (401, 403):
            return {}
        raise
    return {(s["metadata"].get("namespace", ""), s["metadata"]["name"]): s for s in found}


def _dump(doc: Json, output: str) -> str:
    if output == "json":
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


async def _jobs_by_uid(t: LiveTransport, namespace: str | None) -> dict[str, list[Json]]:
    out: defaultdict[str, list[Json]] = defaultdict(list)
    for job in await listed(t, api.JOBS, "Job", namespace, labelSelector=LABEL_UID):
        out[job["metadata"]["labels"][LABEL_UID]].append(job)
    return out


run = run_command("get", _get)
