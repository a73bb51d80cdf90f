"""What the Jobs of a span cost the API server, read from its audit log: every request a
ServiceAccount made (the local API server audits those at Metadata level:
runtime/envtest/server.py), by who made it and what it was.

Who: `controller` (the controller's account), `runner` (the runner pods' accounts: every
request a Job's pod makes of the API server), or `other`. Not in the log: the Job and
pod controllers' own requests (kube-controller-manager's, which the policy leaves out)
and the process node's (it stands in for a kubelet and uses the admin's credentials):
per Job those are one pod created, its status written as it starts and ends, and the
Job's status; the bench counts the pods."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

CONTROLLER_ACCOUNT = "system:serviceaccount:captf-system:captf-controller"
_ACCOUNT = "system:serviceaccount:"


def who(username: str) -> str:
    if username == CONTROLLER_ACCOUNT:
        return "controller"
    if username.startswith(_ACCOUNT) and "runner" in username.rsplit(":", 1)[-1]:
        return "runner"
    return "other"


def what(event: dict[str, Any]) -> str:
    """`verb resource[/subresource]`, such as `get secrets` or `patch jobs/status`."""
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource") or event.get("requestURI") or "")
    sub = ref.get("subresource")
    return f"{event.get('verb')} {resource}{'/' + sub if sub else ''}"


def requests_between(log: Path, start: datetime, end: datetime) -> dict[str, Counter[str]]:
    """The requests completed in [start, end), by who (see the module), then by what.
    Watches are counted when they end, so a long watch counts in the span it ends in."""
    found: dict[str, Counter[str]] = {}
    try:
        lines = log.read_bytes().splitlines()
    except FileNotFoundError:
        return found
    for line in lines:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line still being written
        if event.get("stage") != "ResponseComplete":
            continue
        at = datetime.fromisoformat(str(event.get("stageTimestamp")))
        if not start <= at < end:
            continue
        user = str((event.get("user") or {}).get("username") or "")
        found.setdefault(who(user), Counter())[what(event)] += 1
    return found


def per_job(found: dict[str, Counter[str]], jobs: int) -> dict[str, Any]:
    """Requests per Job: in all, and by who and what (the ten most made each), rounded."""
    n = max(jobs, 1)
    out: dict[str, Any] = {
        "jobs": jobs,
        "total": round(sum(sum(c.values()) for c in found.values()) / n, 2),
    }
    for name, counted in sorted(found.items()):
        out[name] = {
            "total": round(sum(counted.values()) / n, 2),
            **{key: round(count / n, 2) for key, count in counted.most_common(10)},
        }
    return out
