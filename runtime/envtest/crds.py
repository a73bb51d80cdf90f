"""Installing CustomResourceDefinitions from a directory and waiting until they are served."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from runtime.envtest.client import Client

_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# Server-side apply with force: re-installing a changed CRD replaces our fields.
_APPLY = {"fieldManager": "captf-envtest", "force": "true"}
_POLL_SECONDS = 0.05


def crd_documents(directory: Path) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in the *.yaml / *.yml files of `directory`, in name order.

    Other kinds are skipped; a missing directory holds none."""
    if not directory.is_dir():
        return []
    files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))
    docs: list[dict[str, Any]] = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    return docs


def install_crds(client: Client, directory: Path, timeout: float = 60.0) -> list[str]:
    """Apply every CRD found in `directory`; return their names once all are Established."""
    names = []
    for doc in crd_documents(directory):
        name = str(doc["metadata"]["name"])
        client.request(
            "PATCH", f"{_CRDS}/{name}", doc, "application/apply-patch+yaml", params=_APPLY
        )
        names.append(name)
    deadline = time.monotonic() + timeout
    for name in names:
        _wait_established(client, name, deadline)
    return names


def _wait_established(client: Client, name: str, deadline: float) -> None:
    while True:
        crd = client.request("GET", f"{_CRDS}/{name}")
        # Right after creation the server may return `conditions: null`.
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {name} not Established; conditions: {conditions}")
        time.sleep(_POLL_SECONDS)
