"""A shard's labels put on what a launch writes: the Job, its pod, its inputs Secret, and
the runner's environment (which labels the runner's own Secrets with them). The labels
are the object's labels of the selector's keys (controller/core/spec/sharding.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from controller.core.plan.launching import Launch
from controller.core.spec.sharding import SHARD_LABELS_ENV, format_labels

Json = dict[str, Any]


def labelled_launch(start: Launch, labels: Mapping[str, str]) -> Launch:
    """The launch with `labels` on its Job (and pod), its inputs Secret, and in the
    runner's environment."""
    if not labels:
        return start
    job = _with_labels(start.job, labels)
    spec = job["spec"]
    template = spec["template"]
    pod = template["spec"]
    entry = {"name": SHARD_LABELS_ENV, "value": format_labels(labels)}
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
