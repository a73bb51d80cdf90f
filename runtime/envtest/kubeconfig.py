"""A kubeconfig for one client certificate (the admin's by default), with the certificates
embedded so the file stands alone."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from runtime.envtest.pki import Pki

_NAME = "captf-envtest"


def write_kubeconfig(
    path: Path, url: str, pki: Pki, *, cert: Path | None = None, key: Path | None = None
) -> None:
    def data(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": _NAME,
                "cluster": {"server": url, "certificate-authority-data": data(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": _NAME,
                "user": {
                    "client-certificate-data": data(cert or pki.admin_cert),
                    "client-key-data": data(key or pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": _NAME, "context": {"cluster": _NAME, "user": _NAME}}],
        "current-context": _NAME,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole and renamed, so a reader never sees half a file; 0600: it holds a key.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)
