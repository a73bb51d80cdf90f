"""`captf dev apiserver`: a local control plane (etcd, kube-apiserver and, unless
`--no-controller-manager`, kube-controller-manager) in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from runtime.envtest.crds import crd_documents
from runtime.envtest.process import log_tail, terminate_as_interrupt
from runtime.envtest.server import ApiServer

# How often the foreground loop checks that both processes still run.
_LIVENESS_SECONDS = 0.5


def run(args: argparse.Namespace) -> int:
    kubeconfig = Path(args.kubeconfig).resolve()
    crds = Path(args.crds) if args.crds else None
    try:
        with (
            terminate_as_interrupt(),
            ApiServer(kubeconfig=kubeconfig, controller_manager=args.controller_manager) as server,
        ):
            installed = _install(server, crds)
            kcm = (
                f"; controller manager ready in {server.controller_manager_seconds:.1f}s"
                if args.controller_manager
                else ""
            )
            print(
                f"API server ready in {server.startup_seconds:.1f}s at {server.url} "
                f"({installed}{kcm}); kubeconfig: {kubeconfig}; Ctrl-C stops it",
                flush=True,
            )
            while server.alive():
                time.sleep(_LIVENESS_SECONDS)
            # The logs go with the temporary directory, so show their ends now.
            for log in server.logs:
                print(f"--- {log.name}\n{log_tail(log)}", file=sys.stderr)
            print("captf dev apiserver: a process exited; stopping", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0


def _install(server: ApiServer, crds: Path | None) -> str:
    if crds is None or not crd_documents(crds):
        return "no CRDs"
    started = time.monotonic()
    names = server.install_crds(crds)
    return f"{len(names)} CRDs established in {time.monotonic() - started:.1f}s"
