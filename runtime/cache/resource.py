"""What is watched: a resource's URL path, and the key of one object in the cache."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A raw API object as decoded by orjson; never a generated model.
Obj = dict[str, Any]
# Applied to each object as it is decoded, before anything holds it: returns what to keep.
Transform = Callable[[Obj], Obj]


@dataclass(frozen=True, slots=True)
class Resource:
    """A REST resource: `Resource("batch", "v1", "jobs")`; the core group is ""."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None) -> str:
        """The collection path; all namespaces when `namespace` is None."""
        root = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if namespace is not None and self.namespaced:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"


def object_key(obj: Obj) -> str:
    """The cache key: "namespace/name", or "name" when cluster-scoped (as client-go keys)."""
    metadata = obj["metadata"]
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata['name']}" if namespace else metadata["name"]


def resource_version(obj: Obj) -> str:
    return obj["metadata"].get("resourceVersion") or ""


def is_older(version: str, than: str) -> bool:
    """Whether `version` comes strictly before `than`.

    resourceVersions are opaque to the API; on a kube-apiserver they are etcd revisions,
    so they compare as integers. Anything else is never called older."""
    if not (version.isdigit() and than.isdigit()):
        return False
    return int(version) < int(than)
