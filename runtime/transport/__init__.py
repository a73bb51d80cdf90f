"""HTTP to the API server: raw JSON in and out, nothing else.

`runtime.transport.kubeconfig` says where the server is and who we are (TLS,
client certificates, tokens that rotate, exec plugins); aiohttp carries the
requests; bodies are encoded and decoded with orjson, never through generated
models. Nothing here imports kubernetes_asyncio: its package imports its whole
generated client, most of an idle controller's memory."""

# aiohttp costs about 0.1 s of CPU to import: this package gives the session transport's
# names on first use, so a short-lived process that talks through `thin` (the runner,
# one process per Job) never imports it.
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.transport.kubeconfig import ClusterConfig
    from runtime.transport.session import MERGE_PATCH, Transport, open_transport

__all__ = ["MERGE_PATCH", "ClusterConfig", "Transport", "open_transport"]

_HOMES = {
    "MERGE_PATCH": "runtime.transport.session",
    "Transport": "runtime.transport.session",
    "open_transport": "runtime.transport.session",
    "ClusterConfig": "runtime.transport.kubeconfig",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'runtime.transport' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
