"""Reading a CAPTF object's status as others see it: its Ready condition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def ready_of(obj: Mapping[str, Any] | None) -> str | None:
    """The status of the object's Ready condition ("True", "False", "Unknown"); None when
    it has none (or there is no object)."""
    status = (obj or {}).get("status")
    conditions = (status.get("conditions") or []) if isinstance(status, dict) else []
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return str(cond.get("status") or "Unknown")
    return None


def is_ready(obj: Mapping[str, Any] | None) -> bool:
    return ready_of(obj) == "True"
