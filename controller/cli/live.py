"""Reading the cluster from the command line, as the controller's caches hold it.

What one object's snapshot keeps is the core's one read list (controller/core/decide/
reads.py): the collections below are read whole, and `snapshot.build` keeps of them
only what that list names, as the caches look up only what it names.

One `Source` says where and on whose timeline: `captf get` lists collections through
it; `captf decide --live`, `approve`, `plan show` and `restore` read one object's
decide snapshot through it (`read_snapshot`)."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime

from controller.cli.kinds import ALIASES
from controller.cli.live_transport import DEFAULT_REQUEST_TIMEOUT, LiveTransport, open_live
from controller.cli.snapshot_file import SnapshotError
from controller.core import RunnerFacts, runner_rbac
from controller.core.basics.names import (
    CAPI_KINDS,
    KINDS,
    LABEL_RUNNER,
    LABEL_SCOPE,
    LABEL_UID,
    PLAN_KIND,
    POLICY_KIND,
    RUNNER_ACCOUNT,
    SCOPE_BUDGET,
    SCOPE_RUN_SLOT,
    TIME_ORIGIN,
)
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.io import api
from runtime.cache.resource import Resource
from runtime.clock import scaled_time, wall_clock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.timeorigin import shared_origin


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where a command reads, and whose "now" it reads at."""

    # None: $KUBECONFIG, ~/.kube/config, then the in-cluster config.
    kubeconfig: str | None
    # None: every namespace (`captf get -A`); one object's snapshot needs one.
    namespace: str | None
    # The controller's --time-scale: "now" is on its timeline, from the origin it
    # records in `controller_namespace`. At 1.0, the wall clock, and nothing is read.
    time_scale: float = 1.0
    controller_namespace: str = "default"
    # --request-timeout: how long each request waits out transient answers.
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def open(self) -> AbstractAsyncContextManager[LiveTransport]:
        """The cluster's transport: every command's requests go through it."""
        return open_live(self.kubeconfig, self.request_timeout)

    async def now(self, t: LiveTransport) -> datetime:
        wall = wall_clock()
        if self.time_scale == 1.0:
            return wall
        origin = await shared_origin(t, self.controller_namespace, TIME_ORIGIN, wall)
        return scaled_time(origin, wall, self.time_scale)


async def listed(
    t: LiveTransport, resource: Resource, kind: str, namespace: str | None, **params: str
) -> list[Json]:
    """The items of a collection, each with its kind (list items carry none)."""
    path = api.resource_path(resource, namespace)
    listing = await t.request("GET", path, params=params or None)
    api_version = listing.get("apiVersion", "v1")
    return [{"apiVersion": api_version, "kind": kind} | item for item in listing.get("items", [])]


def live_snapshot(
    ref: str, *, now: str | None, source: Source
) -> tuple[datetime, list[Json], RunnerFacts | None]:
    """`captf decide --live KIND/NAME [--now TIME]`: the time, the snapshot's objects, and
    the namespace's runner RBAC (a fact of the decision, as the controller's caches show
    it; None when this user may not read it)."""
    kind, name = live_ref(ref)
    try:
        at = parse_time(now) if now else None
    except TimeFormatError as err:
        raise SnapshotError(f"--now: {err}") from None
    return _run(source, kind, name, at, runner=True)


def read_snapshot(
    kind: str, name: str, *, source: Source, now: datetime | None = None
) -> tuple[datetime, list[Json]]:
    """The objects a decide snapshot of kind/name holds, the object first, and the time
    to decide at (`now`, else the source's). Not found or unreachable: SnapshotError."""
    at, objects, _ = _run(source, kind, name, now, runner=False)
    return at, objects


def _run(
    source: Source, kind: str, name: str, now: datetime | None, *, runner: bool
) -> tuple[datetime, list[Json], RunnerFacts | None]:
    if source.namespace is None:
        raise ValueError("one object's snapshot is read in one namespace")
    try:
        return asyncio.run(_read(source, source.namespace, kind, name, now, runner=runner))
    except ApiError as err:
        raise SnapshotError(f"reading {kind}/{name}: {err}") from None
    except OSError as err:
        raise SnapshotError(f"cannot reach the API server: {err}") from None


async def _runner_facts(t: LiveTransport, ns: str) -> RunnerFacts | None:
    """The namespace's runner RBAC as the controller's caches hold it: its ServiceAccounts
    labelled captf.io/runner=true and the RoleBinding captf-runner. None when the reader
    may not list them (403): the decision then reads no RBAC, as `-f` does."""
    try:
        accounts = await listed(
            t, api.SERVICE_ACCOUNTS, "ServiceAccount", ns, labelSelector=f"{LABEL_RUNNER}=true"
        )
        bindings = await listed(
            t, api.ROLE_BINDINGS, "RoleBinding", ns, fieldSelector=f"metadata.name={RUNNER_ACCOUNT}"
        )
    except ApiError as err:
        if err.status != 403:
            raise
        return None
    return runner_rbac.facts_of(accounts, bindings)


async def _policy_facts(t: LiveTransport, ns: str) -> list[Json]:
    """Every TerraformPolicy and the object's Namespace (its labels pick policies), as the
    controller watches them; what this reader may not read (403) is left out, and a
    decision then reads no policy, as one from a file without them does."""
    found: list[Json] = []
    try:
        found += await listed(t, api.POLICIES, POLICY_KIND, None)
        space = await t.request("GET", api.resource_path(api.NAMESPACES, None, ns))
        found.append({"apiVersion": "v1", "kind": "Namespace"} | space)
    except ApiError as err:
        if err.status not in (403, 404):
            raise
    return found


def live_ref(text: str) -> tuple[str, str]:
    """(kind, name) of --live's KIND/NAME: any spelling `captf get` takes, any name."""
    kind, _, name = text.partition("/")
    if not name or kind.lower() not in ALIASES:
        raise SnapshotError(
            f"--live wants KIND/NAME with KIND one of {', '.join(KINDS)}; got {text!r}"
        )
    return ALIASES[kind.lower()], name


async def _read(
    source: Source, ns: str, kind: str, name: str, now: datetime | None, *, runner: bool
) -> tuple[datetime, list[Json], RunnerFacts | None]:
    async with source.open() as t:
        at = now or await source.now(t)
        obj = await t.request("GET", api.object_path(kind, ns, name))
        rbac = await _runner_facts(t, ns) if runner else None
        uid = obj["metadata"]["uid"]
        jobs = await listed(t, api.JOBS, "Job", ns, labelSelector=f"{LABEL_UID}={uid}")
        plans = await listed(t, api.PLANS, PLAN_KIND, ns, labelSelector=f"{LABEL_UID}={uid}")
        secrets = await listed(t, api.SECRETS, "Secret", ns)
        configmaps = await listed(t, api.CONFIGMAPS, "ConfigMap", ns)
        leases = await listed(t, api.LEASES, "Lease", ns)
        # The run slots and the background budgets, wherever the controller keeps them.
        scopes = f"{LABEL_SCOPE} in ({SCOPE_RUN_SLOT},{SCOPE_BUDGET})"
        slots = await listed(t, api.LEASES, "Lease", None, labelSelector=scopes)
        related: list[Json] = []
        for other in KINDS:
            related += await listed(t, api.OBJECTS[other], other, ns)
        for other in CAPI_KINDS:
            related += await listed(t, api.CAPI_OBJECTS[other], other, ns)
        seen = {(x["metadata"].get("namespace"), x["metadata"]["name"]) for x in leases}
        slots = [
            s for s in slots if (s["metadata"].get("namespace"), s["metadata"]["name"]) not in seen
        ]
        others = [r for r in related if r["metadata"]["uid"] != uid]
        # What says a running Job cannot start, as the controller watches it.
        pods = await listed(
            t,
            api.PODS,
            "Pod",
            ns,
            labelSelector=f"{LABEL_UID}={uid}",
            fieldSelector="status.phase=Pending",
        )
        events = await listed(
            t, api.EVENTS, "Event", ns, fieldSelector="involvedObject.kind=Job,reason=FailedCreate"
        )
        policies = await _policy_facts(t, ns)
        return (
            at,
            [
                obj,
                *jobs,
                *plans,
                *secrets,
                *leases,
                *slots,
                *configmaps,
                *others,
                *pods,
                *events,
                *policies,
            ],
            rbac,
        )
