"""`captf get`'s table, as kubectl prints one: upper-case headers, columns padded to
the widest cell and three spaces apart, one line per object. CLUSTER is the Cluster API
Cluster an object belongs to, MACHINE the Machine or MachinePool a member is the
infrastructure of, LAST RUN the op, result and error kind of status.lastRun. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from controller.cli.people.rows import Row, changes_cell, last_run_cell, policy_cell

# A cell wider than this is cut with an ellipsis; `-o json` prints it whole.
ERROR_WIDTH = 120
GAP = "   "


def human_duration(seconds: float) -> str:
    """kubectl's short durations: 45s, 3m10s, 2h5m, 3d4h (rounded down, never negative)."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60}m" if s % 3600 // 60 else f"{s // 3600}h"
    return f"{s // 86400}d{s % 86400 // 3600}h" if s % 86400 // 3600 else f"{s // 86400}d"


def countdown(at: datetime | None, now: datetime) -> str:
    """`23:10:05 (in 1m30s)`; the date too when it is another day; `-` when no time is set."""
    if at is None:
        return "-"
    clock = at.strftime("%H:%M:%S") if at.date() == now.date() else at.strftime("%Y-%m-%d %H:%M")
    seconds = (at - now).total_seconds()
    if seconds >= 1:
        return f"{clock} (in {human_duration(seconds)})"
    if seconds <= -1:
        return f"{clock} ({human_duration(-seconds)} ago)"
    return f"{clock} (now)"


def one_line(text: str, width: int = ERROR_WIDTH) -> str:
    """The message on one line: its first line (what failed) and its last (why), cut at
    `width`. Tofu's errors span many lines and end with the cause."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return "-"
    line = lines[0] if len(lines) == 1 else f"{lines[0].rstrip(':')}: {lines[-1]}"
    return line if len(line) <= width else line[: width - 1] + "…"


def render(
    rows: Sequence[Row],
    now: datetime,
    *,
    namespaces: bool = False,
    kinds: bool = False,
    clean: Callable[[str], str] = lambda text: text,
    wide: bool = False,
) -> str:
    """The table; `namespaces` adds the NAMESPACE column (-A), `kinds` prefixes names
    with their kind (no KIND given), `wide` (-o wide) CHANGES (the newest run's plan:
    +create ~update -/+replace -delete) and POLICY (the PolicyCompliant reason). `clean`
    redacts a message before it is shown."""
    header = [
        "NAME",
        "CLUSTER",
        "MACHINE",
        "READY",
        "OP",
        "REASON",
        "RETRY AT",
        "ATTEMPTS",
        "SOURCE",
        "LAST RUN",
        "LAST ERROR",
    ]
    if wide:
        header += ["CHANGES", "POLICY"]
    if namespaces:
        header.insert(0, "NAMESPACE")
    lines = [header]
    for row in rows:
        name = f"{row.kind.lower()}/{row.name}" if kinds else row.name
        cells = [
            name,
            row.cluster or "-",
            row.machine or "-",
            row.ready,
            row.op or "-",
            row.reason or "-",
            countdown(row.retry_at, now),
            str(row.attempts),
            row.source or "-",
            last_run_cell(row.last_run),
            one_line(clean(row.last_error)) if row.last_error else "-",
        ]
        if wide:
            cells += [changes_cell(row.changes), policy_cell(row.policy)]
        lines.append([row.namespace, *cells] if namespaces else cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [GAP.join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in lines]
    return "\n".join(text.rstrip() for text in out) + "\n"
