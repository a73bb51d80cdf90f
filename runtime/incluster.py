"""Where a process running in a pod finds its ServiceAccount credentials.

In a container that is the fixed directory below. A process node runs several
pods on one machine without mount namespaces, so it gives each pod a directory
of its own and names it in `CAPTF_SERVICE_ACCOUNT_DIR`; everything here that
loads in-cluster configuration reads the directory through this function."""

from __future__ import annotations

import os
from pathlib import Path

SERVICE_ACCOUNT_DIR_ENV = "CAPTF_SERVICE_ACCOUNT_DIR"
DEFAULT_SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def service_account_dir() -> Path:
    """`$CAPTF_SERVICE_ACCOUNT_DIR` when set, else the directory Kubernetes mounts."""
    override = os.environ.get(SERVICE_ACCOUNT_DIR_ENV)
    return Path(override) if override else DEFAULT_SERVICE_ACCOUNT_DIR
