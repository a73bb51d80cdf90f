"""Starting a Job, as data: its name, its inputs Secret and the Leases it takes first,
labelled for the shard, and the wait should a Lease turn out held when read live; and
the Warning after the API server refused one (its wait is a guard of DecideOp,
controller/core/decide/guards.py). io carries it out
(controller/io/launcher.py). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from controller.core.basics.names import Reason
from controller.core.basics.runner_vars import RunnerVar
from controller.core.decide.claims import LEASE_WAIT
from controller.core.decide.context import Context
from controller.core.decide.decision import Run
from controller.core.decide.facts import Refusal
from controller.core.jobs.job import name_of
from controller.core.leases.writes import LeaseWrite
from controller.core.plan.accounting import Event
from controller.core.plan.jobspec import build_job, inputs_secret, inputs_secret_name
from controller.core.spec.identity import credentials_secret
from controller.core.spec.sharding import format_labels, shard_labels
from runtime.jsonobj import Json


@dataclass(frozen=True)
class Launch:
    job: Json
    inputs_secret: Json | None  # created first when the cache does not show it
    claims: tuple[LeaseWrite, ...]  # taken in this order, before the Job
    # Seconds to wait when a claim's live read finds the Lease held after all (the
    # cache showed it free): the same wait as when the cache shows it held.
    if_busy: float = LEASE_WAIT
    # The run slots to try, in order, when another Job took the first claim's meanwhile.
    other_slots: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return name_of(self.job)

    def wait_if_busy(self, reason: str) -> float | None:
        """Seconds to wait when a claim's live read finds a Lease held after all; None: try
        again at once, rate-limited, as after a conflict. A run slot taken meanwhile is
        the latter: objects launching together each pick the first slot their cache shows
        free, the same one, and all but one lose it; the next pass, on a fresher cache,
        picks another, or waits by the gate when none is left (issue 31: waiting
        LEASE_WAIT here made a MachineDeployment's Machines start one by one, seconds
        apart, with slots free)."""
        return None if reason == Reason.WAITING_FOR_RUN_LEASE else self.if_busy


def refusal_event(refusal: Refusal | None) -> tuple[Event, ...]:
    """One Warning per streak, until recorded, named after the refused Job: a restarted
    controller does not announce the same streak again."""
    if refusal is None or refusal.announced:
        return ()
    name = f"{refusal.job}.jobrefused"
    return (Event(name, "Warning", Reason.JOB_REFUSED, refusal.message),)


def launch_of(ctx: Context, run: Run) -> Launch:
    """The Job the decision runs, with its inputs Secret and its Leases, labelled for the
    shard. The Leases are the ones the guards claimed for it (controller/core/decide/
    guards.py: a Run is decided only once the cached ones are free), carried on the Run."""
    snap, settings = ctx.snap, ctx.settings
    name, seq = snap.next_job(run.op)
    assert run.claims, "a Run carries the claims of its Job"
    assert run.claims[0].job == name, "a Run carries the claims of its Job"
    secret = None
    if inputs_secret_name(snap.obj, ctx.inputs) not in snap.secrets:
        secret = inputs_secret(snap.obj, ctx.inputs)
    credentials = credentials_secret(snap.identity_ref)
    job = build_job(
        snap.obj,
        run,
        inputs=ctx.inputs,
        policy=ctx.policy,
        seq=seq,
        name=name,
        credentials=credentials,
        mount=settings.module_image_mount,
        policies=ctx.policies,
    )
    labels = shard_labels(snap.obj, settings.shard_keys)
    return labelled_launch(Launch(job, secret, run.claims, other_slots=run.other_slots), labels)


# A shard's labels go on what a launch writes: the Job, its pod, its inputs Secret, and the
# runner's environment (the runner labels its own Secrets with them).
def labelled_launch(start: Launch, labels: Mapping[str, str]) -> Launch:
    """The launch with `labels` on its Job (and pod), its inputs Secret, and in the
    runner's environment."""
    if not labels:
        return start
    job = _with_labels(start.job, labels)
    spec = job["spec"]
    template = spec["template"]
    pod = template["spec"]
    entry = {"name": RunnerVar.SHARD_LABELS.value, "value": format_labels(labels)}
    containers = [c | {"env": [*(c.get("env") or []), entry]} for c in pod["containers"]]
    template = _with_labels(template, labels) | {"spec": pod | {"containers": containers}}
    job = job | {"spec": spec | {"template": template}}
    secret = start.inputs_secret
    return replace(
        start, job=job, inputs_secret=None if secret is None else _with_labels(secret, labels)
    )


def labelled_secret(body: Json | None, labels: Mapping[str, str]) -> Json | None:
    return None if body is None or not labels else _with_labels(body, labels)


def _with_labels(body: Json, labels: Mapping[str, str]) -> Json:
    meta = body.get("metadata") or {}
    return body | {"metadata": meta | {"labels": {**labels, **(meta.get("labels") or {})}}}
