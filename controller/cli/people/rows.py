"""One line of `captf get` for one object: pure, from the object and its Jobs.

The status the controller wrote says what waits and until when; the Jobs say what
runs and why the last attempt failed. Nothing here is decided anew."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from controller.core.basics import changes
from controller.core.basics.names import (
    ANN_RETRY,
    CAPI_CLUSTER,
    COND_IDENTITY_ALLOWED,
    COND_POLICY_COMPLIANT,
    Op,
)
from controller.core.basics.redact import Redactor
from controller.core.basics.serials import serial_of
from controller.core.basics.timefmt import TimeFormatError, format_time, parse_time
from controller.core.jobs.history import History
from controller.core.jobs.job import annotations_of, is_finished, name_of, op_of
from controller.core.spec.ready import ready_of
from controller.core.spec.refs import cluster_name_of, owner_of
from runtime.jsonobj import Json

RedactorOf = Callable[[Json], Redactor]


@dataclass(frozen=True)
class Row:
    kind: str
    namespace: str
    name: str
    cluster: str  # the Cluster API Cluster it belongs to; "" while it has none
    # A member's owner Machine or MachinePool (the object it is the infrastructure of);
    # "" for a TerraformCluster (its owner is `cluster`) and while it has none.
    machine: str
    ready: str  # the Ready condition's status: True, False or Unknown
    op: str  # the op of the running Job, else the op the controller waits to run; "" for none
    reason: str  # status.next.reason: what the controller waits for, or Idle
    retry_at: datetime | None  # status.next.at
    # Attempts of `op` in its current streak: its failures since its last success, plus
    # the running Job; 0 when the op has no failures and nothing runs.
    attempts: int
    last_error: str  # the newest unresolved failure's message, whole; "" for none
    # status.lastRun as the controller wrote it: the newest finished Job's op, result,
    # error kind and summary (redacted, values stripped); None before any Job finished.
    last_run: Json | None = None
    # Where the module comes from: `configmap/<name>`, or `image@<digest, 12 hex>` once a
    # Job pinned the module image (`image@unpinned` before); "" when the spec names none.
    source: str = ""
    # status.image as the controller wrote it: the reference and the digest Jobs run.
    image: Json | None = None
    # A contract machine's HealthWatched condition (status, reason, message): the health
    # watch's last reading and next one; None for other objects.
    health: Json | None = None
    # status.lastRun.changes: what the newest run's plan changes; None when it says none.
    changes: Json | None = None
    # The PolicyCompliant condition (status, reason, message); None while no policy judged.
    policy: Json | None = None


def row_of(obj: Json, jobs: Iterable[Json], redactor: RedactorOf | None = None) -> Row:
    """The row of `obj`; `jobs` are its own Jobs (matched by uid label by the caller).
    `redactor` gives a Job's Redactor, as the controller's (the runner redacted first)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    nxt = status.get("next") or {}
    owned = list(jobs)
    running = _running(owned, status.get("activeJob"))
    op = op_of(running) if running is not None else str(nxt.get("op") or "")
    return Row(
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        cluster=cluster_name_of(obj),
        machine=_machine(obj),
        ready=_ready(status),
        op=op,
        reason=str(nxt.get("reason") or ""),
        retry_at=_time(nxt.get("at")),
        attempts=_attempts(status, op, running),
        last_error=identity_refusal(status)
        or cannot_start(status)
        or last_error(owned, redactor)
        or status_error(status),
        last_run=_last_run(status),
        source=source_cell(obj),
        image=status.get("image") if isinstance(status.get("image"), dict) else None,
        health=_condition(status, "HealthWatched"),
        changes=_changes(status),
        policy=_condition(status, COND_POLICY_COMPLIANT),
    )


def _condition(status: Json, kind: str) -> Json | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return {key: cond.get(key) for key in ("status", "reason", "message")}
    return None


def _changes(status: Json) -> Json | None:
    found = changes.from_json((status.get("lastRun") or {}).get("changes"))
    return None if found is None else found.to_json()


# The symbols `tofu plan` prints for each action, in the order counted.
_SYMBOLS = (("create", "+"), ("update", "~"), ("replace", "-/+"), ("delete", "-"))


def changes_cell(shown: Json | None) -> str:
    """`+2 ~1 -/+1 -0`: the newest run's plan, counted per action; `-` when none says."""
    if not shown:
        return "-"
    return " ".join(f"{symbol}{shown.get(action, 0)}" for action, symbol in _SYMBOLS)


def policy_cell(policy: Json | None) -> str:
    """The PolicyCompliant condition's reason; `-` while no policy judged the object."""
    return str(policy.get("reason") or "-") if policy else "-"


# Hex digits of a digest shown in the SOURCE column (as `docker images` shows 12).
DIGEST_SHOWN = 12


def source_cell(obj: Json) -> str:
    """The SOURCE column: the module's shape, and the digest it runs."""
    source = (obj.get("spec") or {}).get("source") or {}
    if isinstance(source.get("configMapRef"), dict):
        return f"configmap/{source['configMapRef'].get('name', '')}"
    if not source.get("image"):
        return ""
    digest = str(((obj.get("status") or {}).get("image") or {}).get("digest") or "")
    algorithm, _, hexes = digest.partition(":")
    return f"image@{algorithm}:{hexes[:DIGEST_SHOWN]}" if hexes else "image@unpinned"


_LAST_RUN_KEYS = ("job", "op", "result", "errorKind", "signal", "summary", "finishedAt")


def _last_run(status: Json) -> Json | None:
    found = status.get("lastRun")
    if not isinstance(found, dict):
        return None
    return {key: str(found[key]) for key in _LAST_RUN_KEYS if found.get(key)}


def last_run_cell(last_run: Json | None) -> str:
    """`apply failed (state-lock)`: the newest run's op, result and error kind, with the
    cloud's signal when one explains it (`apply failed (cloud-throttled: aws:Throttling)`)."""
    if not last_run or not last_run.get("op"):
        return "-"
    text = f"{last_run['op']} {last_run.get('result', '?')}"
    if not last_run.get("errorKind"):
        return text
    signal = f": {last_run['signal']}" if last_run.get("signal") else ""
    return f"{text} ({last_run['errorKind']}{signal})"


def _machine(obj: Json) -> str:
    owner = owner_of(obj)
    return owner.name if owner is not None and owner.kind != CAPI_CLUSTER else ""


def _running(jobs: list[Json], active: object) -> Json | None:
    """The object's unfinished Job: the one status.activeJob names, else any."""
    busy = sorted((j for j in jobs if not is_finished(j)), key=lambda j: name_of(j) != active)
    return busy[0] if busy else None


def _ready(status: Json) -> str:
    return ready_of({"status": status}) or "Unknown"


def _time(value: object) -> datetime | None:
    try:
        return parse_time(value) if value else None
    except TimeFormatError:
        return None


def _attempts(status: Json, op: str, running: Json | None) -> int:
    if running is not None:
        # The retry number the Job was started with: 1 + the failures before it.
        return serial_of(annotations_of(running).get(ANN_RETRY)) or 1
    failures = (status.get("failures") or {}).get(op) or {}
    count = failures.get("count") if isinstance(failures, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def last_error(jobs: list[Json], redactor: RedactorOf | None = None) -> str:
    """The message of the newest counted failure whose op has not succeeded since.

    Plan Secrets are not read here, so a plan whose Secret is gone reads as the success
    its runner reported; the controller's status counts it as the failure it is."""
    history = History(jobs, lambda _job: True, redactor)
    streaks = [f[0] for op in Op if (f := history.failures(op))]
    if not streaks:
        return ""
    return max(streaks, key=lambda record: record.at).verdict.message


def identity_refusal(status: Json) -> str:
    """Why the object may not run with its credentials (IdentityAllowed False), before any
    failure: while it holds, no Job starts, so it is the error to act on."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == COND_IDENTITY_ALLOWED and cond.get("status") == "False":
            return f"{cond.get('reason')}: {cond.get('message')}"
    return ""


# The waits of a running Job that cannot start: the row's error is their cause.
CANNOT_START = frozenset({"JobCannotStart", "ImagePullBackOff", "RunnerRBACNotReady"})


def cannot_start(status: Json) -> str:
    """The Waiting condition's message while a Job cannot start (or may not, for its
    account): the cause (`serviceaccount "x" not found`, the image) is the row's error."""
    reason = str((status.get("next") or {}).get("reason") or "")
    if reason not in CANNOT_START:
        return ""
    for cond in status.get("conditions") or []:
        if (
            isinstance(cond, dict)
            and cond.get("type") == "Waiting"
            and cond.get("reason") == reason
        ):
            return str(cond.get("message") or "")
    return ""


def status_error(status: Json) -> str:
    """The newest failure's message as the controller wrote it into status.failures: what
    the row shows once the failed Jobs are pruned (a destroy failing for days)."""
    entries = [e for e in (status.get("failures") or {}).values() if isinstance(e, dict)]
    with_message = [e for e in entries if isinstance(e.get("message"), str) and e["message"]]
    if not with_message:
        return ""
    newest = max(with_message, key=lambda e: str(e.get("lastFailedAt") or ""))
    return str(newest["message"])


def to_json(row: Row, now: datetime) -> Json:
    """The row as `-o json|yaml` prints it: every field whole, times in RFC 3339."""
    out: Json = {
        "kind": row.kind,
        "namespace": row.namespace,
        "name": row.name,
        "cluster": row.cluster or None,
        "machine": row.machine or None,
        "ready": row.ready,
        "op": row.op or None,
        "reason": row.reason or None,
        "retryAt": format_time(row.retry_at) if row.retry_at else None,
        "retryInSeconds": _seconds(row.retry_at, now),
        "attempts": row.attempts,
        "lastError": row.last_error or None,
        "lastRun": row.last_run,
        "source": row.source or None,
        "image": row.image,
        "health": row.health,
        "changes": row.changes,
        "policy": row.policy,
    }
    return out


def _seconds(at: datetime | None, now: datetime) -> float | None:
    return None if at is None else round((at - now).total_seconds(), 3)
