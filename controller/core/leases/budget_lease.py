"""An identity's background budget Lease: the record of the background Jobs started in
the last minute through one set of credentials, and the stretch of their schedules.

One Lease per set of credentials (`budget_key`: a TerraformClusterIdentity, or a
credentials Secret of a namespace), in the controller's namespace, labelled with the
scope `background-budget` and named after the key (`budget_lease_name`). Its
annotations:

- `captf.io/background-starts`: {Job name: time started}, the starts of the last
  WINDOW. A background Job's launch adds itself with a compare-and-swap, as it takes a
  run slot (`claim`): two launches that read the same version cannot both take the last
  start, so the budget holds across workers and processes. Entries leave by time, so a
  Job's end writes nothing here;
- `captf.io/background-stretch`: the factor the objects' schedules are stretched by
  (controller/core/leases/budget.py, `stretch_of`), written by the controller when the
  fleet's demand changes it. Missing or unreadable reads as 1: a lost Lease stretches
  nothing, and the window still bounds the starts.

Durable evidence, not status: `kubectl get lease -l captf.io/scope=background-budget`
shows it, `captf decide --live` reads it, and a restarted controller counts on. Pure."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

import orjson

from controller.core.basics.names import (
    ANN_BACKGROUND_STARTS,
    ANN_BACKGROUND_STRETCH,
    ANN_BUDGET_OF,
    BUDGET_PREFIX,
    IDENTITY,
    LABEL_SCOPE,
    SCOPE_BUDGET,
    Reason,
)
from controller.core.basics.timefmt import TimeFormatError, format_micro, format_time, parse_time
from controller.core.jobs.job import annotations_of, labels_of, name_of
from controller.core.leases.budget import WINDOW, budget_free_at, in_window
from controller.core.leases.family import Busy
from controller.core.spec.identity import IdentityRef
from runtime.jsonobj import Json

LEASE_API: Json = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
_SLUG = re.compile(r"[^a-z0-9-]+")
_SLUG_LENGTH = 39  # with the prefix and the hash, 63: a label value fits it


def budget_key(ref: IdentityRef | None, namespace: str) -> str:
    """Whose credentials an object reads the cloud through: `identity <name>` for a
    TerraformClusterIdentity (cluster-wide), `secret <namespace>/<name>` for a credentials
    Secret, `none` for an object without credentials."""
    if ref is None:
        return "none"
    if ref.kind == IDENTITY:
        return f"identity {ref.name}"
    return f"secret {namespace}/{ref.name}"


def budget_lease_name(key: str) -> str:
    """The Lease of a budget key: readable, and unique by a hash of the whole key."""
    slug = _SLUG.sub("-", key.lower()).strip("-")[:_SLUG_LENGTH].strip("-")
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"{BUDGET_PREFIX}{slug}-{digest}"


def is_budget_lease(lease: Json) -> bool:
    return labels_of(lease).get(LABEL_SCOPE) == SCOPE_BUDGET


def find(leases: tuple[Json, ...] | list[Json], namespace: str, key: str) -> Json | None:
    """The budget Lease of `key` among `leases` (the controller's namespace's)."""
    name = budget_lease_name(key)
    return next(
        (
            lease
            for lease in leases
            if name_of(lease) == name and lease["metadata"].get("namespace") == namespace
        ),
        None,
    )


def starts_of(lease: Json | None) -> dict[str, datetime]:
    """The recorded starts, by Job; an unreadable record reads as none."""
    if lease is None:
        return {}
    try:
        raw = orjson.loads(annotations_of(lease).get(ANN_BACKGROUND_STARTS) or "{}")
    except orjson.JSONDecodeError:
        return {}
    found: dict[str, datetime] = {}
    if not isinstance(raw, dict):
        return found
    for job, at in raw.items():
        try:
            found[str(job)] = parse_time(str(at))
        except TimeFormatError:
            continue
    return found


def stretch_in(lease: Json | None) -> float:
    """The stretch the Lease records; 1 when none (or none readable) is."""
    if lease is None:
        return 1.0
    try:
        value = float(annotations_of(lease).get(ANN_BACKGROUND_STRETCH) or 1.0)
    except ValueError:
        return 1.0
    return value if value >= 1.0 else 1.0


def free_at(lease: Json | None, job: str, now: datetime, per_minute: int) -> datetime | None:
    """When `job` may start under the budget the Lease records: None when it may now (or
    it started already: its launch is being replayed)."""
    starts = starts_of(lease)
    if job in starts:
        return None
    return budget_free_at(list(starts.values()), now, per_minute)


def claim(
    live: Json | None,
    *,
    namespace: str,
    key: str,
    job: str,
    now: datetime,
    per_minute: int,
) -> Json | Busy | None:
    """The Lease recording `job`'s start, from the version read live; None when it is
    recorded already; Busy when the budget has no start left this minute."""
    starts = starts_of(live)
    if job in starts:
        return None
    until = budget_free_at(list(starts.values()), now, per_minute)
    if until is not None:
        message = (
            f"{key} started {per_minute} background Jobs in the last minute, its budget;"
            f" the next may start at {format_time(until)}"
        )
        return Busy(Reason.WAITING_FOR_BACKGROUND_BUDGET, message)
    since = set(in_window(starts.values(), now))
    kept = {name: at for name, at in starts.items() if at in since}
    kept[job] = now
    notes = {ANN_BACKGROUND_STARTS: _record(kept), ANN_BUDGET_OF: key}
    return _with(live, namespace, key, notes)


def with_stretch(live: Json | None, *, namespace: str, key: str, stretch: float) -> Json | None:
    """The Lease recording `stretch`; None when it says so already."""
    if live is not None and stretch_in(live) == stretch and _recorded(live):
        return None
    notes = {ANN_BACKGROUND_STRETCH: f"{stretch:g}", ANN_BUDGET_OF: key}
    return _with(live, namespace, key, notes)


def _recorded(live: Json) -> bool:
    return ANN_BACKGROUND_STRETCH in annotations_of(live)


def _record(starts: dict[str, datetime]) -> str:
    ordered = sorted(starts.items(), key=lambda item: item[1])
    return orjson.dumps({job: format_micro(at) for job, at in ordered}).decode()


def _with(live: Json | None, namespace: str, key: str, notes: dict[str, str]) -> Json:
    name = budget_lease_name(key)
    meta: Json = {"name": name, "namespace": namespace}
    if live is not None:
        meta = dict(live["metadata"])
    labels = dict(meta.get("labels") or {}) | {LABEL_SCOPE: SCOPE_BUDGET}
    annotations = dict(meta.get("annotations") or {}) | notes
    body = (live or {}) | LEASE_API
    return body | {
        "metadata": meta | {"labels": labels, "annotations": annotations},
        "spec": dict((live or {}).get("spec") or {}),
    }


__all__ = ["WINDOW", "budget_key", "claim", "starts_of", "stretch_in", "with_stretch"]
