"""A saved plan (`tofu show -json`) in human form, as `tofu show` would summarise it.

Pure. Sensitive values are never printed, only marked: the plan Secret holds them,
the terminal must not."""

from __future__ import annotations

from runtime.jsonobj import Json

_SYMBOLS = {
    ("create",): "+ create ",
    ("update",): "~ update ",
    ("delete",): "- destroy",
    ("delete", "create"): "-/+ replace",
    ("create", "delete"): "+/- replace",
    ("read",): "<= read  ",
    ("forget",): ". forget ",
}
_INERT = frozenset({("no-op",), ("read",)})
SENSITIVE = "(sensitive value)"
UNKNOWN = "(known after apply)"


def render_plan(plan: Json) -> list[str]:
    """One line per changed resource, its changed attributes below it, then the totals."""
    lines: list[str] = []
    counts = {"add": 0, "change": 0, "destroy": 0}
    for change in plan.get("resource_changes") or []:
        if not isinstance(change, dict):
            continue
        detail = change.get("change") or {}
        actions = tuple(detail.get("actions") or ())
        if actions in _INERT:
            continue
        _count(actions, counts)
        symbol = _SYMBOLS.get(actions, "/".join(actions))
        lines.append(f"  {symbol} {change.get('address', '?')}")
        lines += [f"      {text}" for text in attribute_changes(detail)]
    if not lines:
        return ["No changes. The infrastructure matches the configuration."]
    total = f"Plan: {counts['add']} to add, {counts['change']} to change"
    return [*lines, "", f"{total}, {counts['destroy']} to destroy."]


def _count(actions: tuple[str, ...], counts: dict[str, int]) -> None:
    if "create" in actions:
        counts["add"] += 1
    if "delete" in actions:
        counts["destroy"] += 1
    if actions == ("update",):
        counts["change"] += 1


def attribute_changes(change: Json) -> list[str]:
    """`name: before -> after` for each top-level attribute that differs."""
    before, after, unknown = (_mapping(change.get(k)) for k in ("before", "after", "after_unknown"))
    hidden = _sensitive_keys(change.get("before_sensitive")) | _sensitive_keys(
        change.get("after_sensitive")
    )
    out = []
    for key in sorted(set(before) | set(after) | set(unknown)):
        old, new = before.get(key), after.get(key)
        if old == new and not unknown.get(key):
            continue
        if key in hidden or "*" in hidden:
            out.append(f"{key}: {SENSITIVE}")
            continue
        shown_new = UNKNOWN if unknown.get(key) else _value(new)
        out.append(f"{key}: {_value(old)} -> {shown_new}")
    return out


def _mapping(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def _sensitive_keys(marks: object) -> set[str]:
    """Top-level attributes marked sensitive, wholly or in part."""
    if marks is True:
        return {"*"}
    if not isinstance(marks, dict):
        return set()
    return {key for key, mark in marks.items() if mark not in (False, None, {}, [])}


def _value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return f"({len(value)} {'keys' if isinstance(value, dict) else 'items'})"
    return str(value)
