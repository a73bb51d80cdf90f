"""An in-memory API server for the reconciler, and the caches it feeds.

It implements the `Api` protocol the reconciler writes through, with the API
server's rules for what the reconciler relies on: resourceVersions, 409 Conflict
on a stale precondition, 409 AlreadyExists, 404, JSON merge patch, the status
subresource, finalizers that hold a deletion, and an immutable uid. `sync()` shows
the caches what the server holds (a test that does not call it has a cache that
lags). `crash_at(k)` makes the k-th write raise `Crash` before it takes effect: the
process stops there, and a fresh reconciler on the same server plays the restart.

Only what the reconciler does is implemented; anything else fails loudly."""

from __future__ import annotations

import copy
import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from controller.core.basics.names import (
    CAPI_PLURALS,
    KINDS,
    LABEL_MANAGED_BY,
    LABEL_RUNNER,
    LABEL_RUNNER_RBAC,
    LABEL_SCOPE,
    LABEL_UID,
    MANAGER,
    PLURALS,
)
from controller.io.caches import Caches
from controller.io.trimming import own_secret_fields
from runtime.cache import Informer
from runtime.errors import ApiError
from runtime.jsonobj import Json

_KIND_OF_PLURAL = {plural: kind for kind, plural in PLURALS.items()}
# Resources with a status subresource: a write of the object leaves its status alone.
_WITH_STATUS = {*PLURALS.values(), "jobs"}


class Crash(Exception):
    """The process stopped before this write reached the server."""


@dataclass(frozen=True)
class _Path:
    prefix: str  # the collection: "/apis/batch/v1/namespaces/ns/jobs"
    plural: str
    namespace: str
    name: str = ""
    status: bool = False


def _parse(path: str) -> _Path:
    parts = path.strip("/").split("/")
    at = parts.index("namespaces")
    namespace, plural, rest = parts[at + 1], parts[at + 2], parts[at + 3 :]
    prefix = "/" + "/".join(parts[: at + 3])
    return _Path(prefix, plural, namespace, rest[0] if rest else "", rest[1:] == ["status"])


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


@dataclass
class FakeApi:
    clock_text: str = "2026-06-01T12:00:00Z"  # creationTimestamp of what is created
    objects: dict[str, dict[str, Json]] = field(default_factory=dict)  # collection -> name -> obj
    writes: list[tuple[str, str]] = field(default_factory=list)  # (method, path) that took effect
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    # Creates the server refuses, by resource (e.g. "jobs": a quota or a webhook says no).
    refuse: dict[str, ApiError] = field(default_factory=dict)
    _crash_at: int | None = None
    _attempts: int = 0

    def crash_at(self, write: int | None) -> None:
        """The `write`-th write from now (1 = the next) raises Crash; None: never."""
        self._crash_at, self._attempts = write, 0

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Any = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 -- the protocol's signature
        accept: str = "application/json",
    ) -> Json:
        where = _parse(path)
        if method == "GET" and not where.name:
            return {"items": self._list(where, (params or {}).get("labelSelector", ""))}
        if method == "GET":
            return copy.deepcopy(self._get(where))
        self._attempts += 1
        if self._crash_at is not None and self._attempts >= self._crash_at:
            self._crash_at = None
            raise Crash(f"{method} {path}")
        assert isinstance(body, dict), body
        out = self._write(method, where, body)
        self.writes.append((method, path))
        return copy.deepcopy(out)

    @asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str], accept: str = "application/json"
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """No watches: `sync()` fills the caches instead."""
        raise NotImplementedError(path)
        yield  # pragma: no cover

    # -- reads and writes -----------------------------------------------------------------

    def collection(self, prefix: str) -> dict[str, Json]:
        return self.objects.setdefault(prefix, {})

    def _get(self, where: _Path) -> Json:
        found = self.collection(where.prefix).get(where.name)
        if found is None:
            # As the API server says it: the Status details name what was not found.
            group = where.prefix.split("/")[2] if where.prefix.startswith("/apis/") else ""
            details = {"name": where.name, "group": group, "kind": where.plural}
            message = f"{where.plural} {where.name} not found"
            status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": message}
            raise ApiError.from_status(status | {"details": details})
        return found

    def _list(self, where: _Path, selector: str) -> list[Json]:
        """The collection's objects with every label of `selector` (`k=v,...` only)."""
        wanted = dict(term.split("=", 1) for term in selector.split(",") if term)
        return [
            copy.deepcopy(obj)
            for obj in self.collection(where.prefix).values()
            if wanted.items() <= _labels(obj).items()
        ]

    def _write(self, method: str, where: _Path, body: Json) -> Json:
        match method:
            case "POST":
                return self.create(where.prefix, body)
            case "PUT":
                return self._replace(where, body)
            case "PATCH":
                return self._patch(where, body)
            case "DELETE":
                return self._delete(where)
        raise AssertionError(f"unexpected {method}")

    def create(self, prefix: str, body: Json) -> Json:
        refused = self.refuse.get(prefix.rsplit("/", 1)[-1])
        if refused is not None:
            raise refused
        items = self.collection(prefix)
        meta = body.get("metadata", {})
        name = meta.get("name")
        assert name, "generateName is not implemented"
        if meta.get("resourceVersion"):
            raise ApiError(500, "InternalError", "resourceVersion should not be set on create")
        if name in items:
            raise ApiError(409, "AlreadyExists", f"{name} already exists")
        version = next(self._versions)
        obj = copy.deepcopy(body)
        obj["metadata"] = dict(meta) | {
            "namespace": _parse(prefix + "/x").namespace,
            "uid": f"uid-{name}-{version}",
            "resourceVersion": str(version),
            "creationTimestamp": self.clock_text,
        }
        items[name] = obj
        return obj

    def _check_version(self, current: Json, body: Json) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != current["metadata"]["uid"]:
            raise ApiError(422, "Invalid", "metadata.uid: field is immutable")

    def _store(self, where: _Path, current: Json, new: Json) -> Json:
        if where.status:
            new = current | {"status": new.get("status")}
        elif where.plural in _WITH_STATUS and "status" in current:
            new = new | {"status": current["status"]}
        meta = new["metadata"]
        for kept in ("uid", "creationTimestamp", "namespace", "name"):
            meta[kept] = current["metadata"][kept]
        if new == current:
            return current  # a no-op write keeps its version, as the API server does
        meta["resourceVersion"] = str(next(self._versions))
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.collection(where.prefix)[where.name]
        else:
            self.collection(where.prefix)[where.name] = new
        return new

    def _replace(self, where: _Path, body: Json) -> Json:
        current = self._get(where)
        self._check_version(current, body)
        return self._store(where, current, copy.deepcopy(body))

    def _patch(self, where: _Path, body: Json) -> Json:
        current = self._get(where)
        self._check_version(current, body)
        patch = copy.deepcopy(body)
        patch.get("metadata", {}).pop("resourceVersion", None)
        return self._store(where, current, merge(current, patch))

    def _delete(self, where: _Path) -> Json:
        current = self._get(where)
        if current["metadata"].get("finalizers"):
            marked = merge(current, {"metadata": {"deletionTimestamp": self.clock_text}})
            return self._store(where, current, marked)
        del self.collection(where.prefix)[where.name]
        return {"kind": "Status", "status": "Success"}

    # -- what tests need --------------------------------------------------------------------

    def of(self, plural: str) -> list[Json]:
        return [
            copy.deepcopy(obj)
            for prefix, items in sorted(self.objects.items())
            if prefix.endswith("/" + plural)
            for obj in items.values()
        ]

    def sync(self, caches: Caches) -> None:
        """Shows the caches exactly what the server holds now (as a watch would, at once)."""
        version = str(next(self._versions))
        for kind, informer in caches.objects.items():
            _fill(informer, self.of(PLURALS[kind]), version)
        for kind, informer in caches.capi.items():
            _fill(informer, self.of(CAPI_PLURALS[kind]), version)
        _fill(caches.jobs, [j for j in self.of("jobs") if LABEL_UID in _labels(j)], version)
        secrets = self.of("secrets")
        own = [s for s in secrets if _labels(s).get(LABEL_MANAGED_BY) == MANAGER]
        _fill(caches.own_secrets, [own_secret_fields(s) for s in own], version)
        others = [s for s in secrets if LABEL_MANAGED_BY not in _labels(s)]
        _fill(caches.secrets, others, version)
        _fill(caches.configmaps, self.of("configmaps"), version)
        leases = [lease for lease in self.of("leases") if LABEL_SCOPE in _labels(lease)]
        _fill(caches.leases, leases, version)
        accounts = [a for a in self.of("serviceaccounts") if _labels(a).get(LABEL_RUNNER)]
        _fill(caches.runner_accounts, accounts, version)
        bindings = self.of("rolebindings")
        _fill(
            caches.runner_bindings,
            [b for b in bindings if LABEL_RUNNER_RBAC in _labels(b)],
            version,
        )


def _labels(obj: Json) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def _fill(informer: Informer, objects: list[Json], version: str) -> None:
    informer.store.replace(objects, version)


__all__ = ["KINDS", "Crash", "FakeApi", "merge"]
