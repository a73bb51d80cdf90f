"""Cluster API objects as the API returns them, small enough to read in a test."""

from __future__ import annotations

import base64
from typing import Any

from runtime.jsonobj import Json


def meta(name: str, namespace: str = "team-a", **extra: Any) -> Json:
    return {"name": name, "namespace": namespace, **extra}


def cluster(name: str = "prod", **spec: Any) -> Json:
    return {"metadata": meta(name, uid="u-cluster"), "spec": spec}


def terraform_object(name: str, **metadata: Any) -> Json:
    return {"metadata": meta(name, uid="u-obj", generation=3, **metadata), "spec": {}}


def bootstrap_secret(value: bytes | None = b"#cloud-config\n", fmt: str | None = None) -> Json:
    data: Json = {}
    if value is not None:
        data["value"] = base64.b64encode(value).decode()
    if fmt is not None:
        data["format"] = base64.b64encode(fmt.encode()).decode()
    return {"metadata": meta("prod-md-0-boot"), "data": data}
