"""A shard's labels on what its objects make (`captf run --watch-label-selector`).

A shard watches the CAPTF objects its selector matches. For its Job and Secret
informers to take the same selector, the Jobs and the Secrets CAPTF writes for an
object carry the object's labels of the selector's keys: the inputs Secret and the
Job from the controller, the state, plan and outputs Secrets from the runner (told
them in RunnerVar.SHARD_LABELS). Another shard's Jobs and Secrets are then never listed,
held or woken on."""

from __future__ import annotations

import re
from collections.abc import Mapping

from runtime.jsonobj import Json

# A requirement's key: what stands before its operator (=, ==, !=, in, notin), or the
# whole of an exists (`key`) or does-not-exist (`!key`) requirement.
# (`\s*!?\s*` would try every split of a run of spaces between its two halves.)
_KEY = re.compile(r"\s*(?:!\s*)?([A-Za-z0-9][A-Za-z0-9._/-]*)")


def selector_keys(selector: str | None) -> tuple[str, ...]:
    """The label keys a label selector names, in order, each once."""
    keys: list[str] = []
    depth, start = 0, 0
    text = selector or ""
    for at, char in enumerate(f"{text},"):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            found = _KEY.match(text[start:at])
            if found:
                keys.append(found.group(1))
            start = at + 1
    return tuple(dict.fromkeys(keys))


def shard_labels(obj: Json, keys: tuple[str, ...]) -> dict[str, str]:
    """The object's labels of those keys (a key it lacks is left out)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return {key: str(labels[key]) for key in keys if key in labels}


def format_labels(labels: Mapping[str, str]) -> str:
    """`k=v,k2=v2`: label keys and values hold neither `,` nor `=`."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def parse_labels(text: str | None) -> dict[str, str]:
    pairs = (part.split("=", 1) for part in (text or "").split(",") if "=" in part)
    return {k.strip(): v.strip() for k, v in pairs if k.strip()}
