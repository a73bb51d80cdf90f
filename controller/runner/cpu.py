"""The runner's CPU line: its last line in the pod log, its own CPU seconds (the
interpreter's start, its imports, the API calls, the redaction of tofu's output) and
its tofu commands' (the children it waited for). `captf bench capi` reads it to say
where a Job's CPU goes (docs/performance.md)."""

from __future__ import annotations

import os
import re

PREFIX = "captf-runner: cpu "
_LINE = re.compile(re.escape(PREFIX) + r"([0-9.]+) s own, ([0-9.]+) s tofu$", re.MULTILINE)


def line(times: os.times_result | None = None) -> str:
    """The line for this process, as it stands now."""
    t = os.times() if times is None else times
    own, tofu = t.user + t.system, t.children_user + t.children_system
    return f"{PREFIX}{own:.3f} s own, {tofu:.3f} s tofu"


def parse(text: str) -> tuple[float, float] | None:
    """(own, tofu) CPU seconds from a runner's log, the last such line; None without one."""
    found = _LINE.findall(text)
    return (float(found[-1][0]), float(found[-1][1])) if found else None
