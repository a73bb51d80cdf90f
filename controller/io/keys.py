"""The work queue's keys: `Kind/namespace/name`.

The three CAPTF kinds share one queue, so a key names the kind as well; a key is all a
reconcile is told (level-based: it reads everything else)."""

from __future__ import annotations

from runtime.jsonobj import Json


def key_of(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def key_for(obj: Json) -> str:
    """The key of a CAPTF object that carries its kind."""
    meta = obj["metadata"]
    return key_of(obj["kind"], meta["namespace"], meta["name"])


def parse_key(key: str) -> tuple[str, str, str]:
    """(kind, namespace, name): kinds and namespaces hold no `/`."""
    kind, namespace, name = key.split("/", 2)
    return kind, namespace, name
