"""The API client the reconciler writes through: each write's answer goes into the cache.

A status PUT or a patch returns the object as stored. Noting it in the informer
(runtime's `Informer.note_write`) means the next reconcile reads what this one
wrote, even before the watch delivers it, and the watch event of that version,
when it comes, is no change at all: our own writes wake nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.basics.names import GROUP, KINDS, PLURALS, VERSION
from controller.io.api import Api
from controller.io.caches import Caches

_WRITES = frozenset({"PUT", "PATCH"})
_KIND_OF = {PLURALS[kind]: kind for kind in KINDS}
_OBJECTS = f"/apis/{GROUP}/{VERSION}/namespaces/"
_JOBS = "/apis/batch/v1/namespaces/"


@dataclass(frozen=True)
class NotingWrites:
    """`Api`, passing every request on; noting the answers of writes to CAPTF objects
    (spec, metadata or status) and to Jobs."""

    inner: Api
    caches: Caches

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 -- the transport's per-request deadline
    ) -> dict[str, Any]:
        answer = await self.inner.request(
            method, path, params=params, body=body, content_type=content_type, timeout=timeout
        )
        if method in _WRITES and answer.get("metadata"):
            self._note(path, answer)
        return answer

    def _note(self, path: str, answer: dict[str, Any]) -> None:
        if path.startswith(_OBJECTS):
            # .../namespaces/<ns>/<plural>/<name>[/status]
            parts = path[len(_OBJECTS) :].split("/")
            kind = _KIND_OF.get(parts[1]) if len(parts) >= 3 else None
            if kind is not None:
                self.caches.objects[kind].note_write(answer)
        elif path.startswith(_JOBS) and "/jobs/" in path:
            self.caches.jobs.note_write(answer)
