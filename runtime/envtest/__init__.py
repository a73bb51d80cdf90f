"""A real kube-apiserver and etcd on loopback, built from Go modules, for tests
and local runs (the counterpart of controller-runtime's envtest).

    with ApiServer() as server:
        server.install_crds(Path("manifests/crds"))
        server.request("GET", "/version")
"""

from runtime.envtest.binaries import BinariesMissing, binary_dir
from runtime.envtest.client import RequestFailed
from runtime.envtest.server import ApiServer, StartupFailed

__all__ = ["ApiServer", "BinariesMissing", "RequestFailed", "StartupFailed", "binary_dir"]
