"""Objects as the caches receive them, and a server that answers single GETs: what the
cache tests build from."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping
from typing import Any

from controller.core.basics.names import (
    LABEL_KIND,
    LABEL_NAME,
    LABEL_OP,
    LABEL_UID,
    MANAGED_BY,
)
from controller.core.decide.snapshot import Snapshot
from controller.io.caches import Caches
from runtime.cache import Informer, Watched
from runtime.errors import ApiError
from runtime.jsonobj import Json

NS = "ns"


class Server:
    """Answers GETs of single Secrets and ConfigMaps from a dict; counts them."""

    def __init__(self) -> None:
        self.objects: dict[str, Json] = {}
        self.gets: Counter[str] = Counter()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        assert method == "GET"
        self.gets[path] += 1
        if path not in self.objects:
            raise ApiError(404, "NotFound", path)
        return copy.deepcopy(self.objects[path])

    def stream(self, path: str, *, params: Mapping[str, str], accept: str = "") -> Any:
        raise AssertionError("nothing watches in these tests")


def meta(name: str, rv: int = 1, **extra: Any) -> Json:
    return {"name": name, "namespace": NS, "resourceVersion": str(rv), "uid": f"uid-{name}"} | extra


def captf(kind: str, name: str, rv: int = 1, *, spec: Json | None = None, **extra: Any) -> Json:
    return {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": kind,
        "metadata": meta(name, rv, **extra),
        "spec": spec or {},
    }


def secret(name: str, rv: int = 1, labels: dict[str, str] | None = None) -> Json:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta(name, rv, labels=labels or {})}


def job(owner: Json, name: str, rv: int = 1, annotations: dict[str, str] | None = None) -> Json:
    labels = {
        LABEL_KIND: owner["kind"],
        LABEL_NAME: owner["metadata"]["name"],
        LABEL_UID: owner["metadata"]["uid"],
        LABEL_OP: "apply",
    }
    container = {"name": "runner", "image": "captf-runner", "env": [{"name": "X", "value": "y"}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(name, rv, labels=labels, annotations=annotations or {}),
        "spec": {"template": {"spec": {"containers": [container]}}},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


def carrying(owner: Json, inputs_secret: str) -> Json:
    """An apply Job of `owner` whose runner read the inputs Secret `inputs_secret`."""
    carrier = job(owner, f"{owner['metadata']['name']}-apply-1")
    env = carrier["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "CAPTF_INPUTS_SECRET", "value": inputs_secret})
    return carrier


async def load(caches: Caches, obj: Json) -> None:
    """The contents `obj`'s pass loads, as the reconciler loads them."""
    await caches.load_contents(obj, caches.jobs_of(obj["metadata"]["uid"]))


def snapshot(caches: Caches, obj: Json) -> Snapshot:
    """`obj`'s snapshot, as the reconciler takes it."""
    return caches.snapshot(obj, caches.jobs_of(obj["metadata"]["uid"]))


def deliver(informer: Informer, kind: str, obj: Json) -> None:
    """One watch event through the informer, as its reflector would hand it over."""
    informer._apply(Watched(kind, obj, obj["metadata"]["resourceVersion"]))


def own(name: str, labels: dict[str, str], data: dict[str, str]) -> Json:
    """A Secret as CAPTF writes it: labelled, with its data."""
    return secret(name, labels=labels | MANAGED_BY) | {"data": data}
