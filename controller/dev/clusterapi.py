"""Cluster API's core manager beside the local API server, run as Cluster API's own envtest
runs it:

    with ApiServer() as server:
        async with ClusterApi(server) as capi:
            ...  # Clusters, MachineDeployments ... reconciled and admitted by the real manager

The manager and what it needs on the server come from hack/capi/build.sh, which builds it
from Go modules and copies its CRDs and webhook configurations out of the module cache.

- CRDs: each serves only its storage version, v1beta2; the older ones (v1beta1, and
  v1alpha1 of the ipam and runtime groups) get `served: false`. Cluster API's CRDs carry
  no `spec.conversion` (its install adds a conversion webhook through cert-manager), and
  without one the API server "converts" by relabelling apiVersion, which is wrong for
  v1beta1. With one version served nothing is ever converted.
- Webhooks: the mutating and validating configurations, named `capi-...` as Cluster API's
  kustomization names them, each `service` clientConfig replaced by
  `url: https://127.0.0.1:<port><path>` and a caBundle: a self-signed certificate for
  127.0.0.1, made per start, that the manager serves from `--webhook-cert-dir`. The
  manager's /readyz waits for its webhook server, so it needs the certificate in any case.
  Leaving the block deletes both configurations: with `failurePolicy: Fail` they would
  reject every later write of a Cluster API object on a server that outlives the manager.
  The CRDs stay.
- The manager runs as the server's admin (its kubeconfig), with leader election off, the
  MachinePool and ClusterTopology feature gates on, health and plain-HTTP diagnostics
  (metrics) on loopback ports, and the webhook on a port free on every interface: it binds
  all of them and has no flag to bind fewer. Ready means /readyz answers on the health port.
  Its log is `<server workdir>/capi/manager.log`."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

import anyio
import yaml

from controller.dev.install import Api, free_port
from controller.io.api import resource_path
from runtime.builds import BuildFailed, built_dir
from runtime.cache.resource import Resource
from runtime.certs import self_signed
from runtime.envtest import RequestFailed, process
from runtime.envtest.client import Client
from runtime.jsonobj import Json
from runtime.lifecycle import RunsInContext

DIR_ENV = "CAPTF_CAPI_DIR"
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "capi" / "build.sh"
FEATURE_GATES = "MachinePool=true,ClusterTopology=true"
STARTUP_TIMEOUT_SECONDS = 90.0
_WEBHOOK_CONFIGURATIONS = {
    kind: Resource("admissionregistration.k8s.io", "v1", plural, namespaced=False)
    for kind, plural in (
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
    )
}
# Server-side apply with force, as runtime.envtest.crds applies CRDs: a restart replaces our fields.
_APPLY = {"fieldManager": "captf-clusterapi", "force": "true"}
_POLL_SECONDS = 0.1
# libyaml's loader when PyYAML has it: the pure-Python one needs 1.3 s for the CRDs.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ClusterApiMissing(Exception):
    """No build of the manager, and building was not asked for (or failed)."""


class StartupFailed(Exception):
    """The manager exited or did not get ready; the message ends with its log's tail."""


class Server(Api, Protocol):
    """What this needs of runtime.envtest.ApiServer."""

    @property
    def kubeconfig(self) -> Path: ...

    @property
    def workdir(self) -> Path: ...

    def install_crds(self, directory: Path, timeout: float = 60.0) -> list[str]: ...


def capi_dir(*, build: bool = True) -> Path:
    """The build directory ($CAPTF_CAPI_DIR, else hack/capi/build.sh's); without `build`,
    only an existing build is accepted. Raises ClusterApiMissing saying what is missing."""
    explicit = os.environ.get(DIR_ENV)
    directory = Path(explicit) if explicit else _from_script(build)
    for name in ("manager", "webhook/manifests.yaml", "crds"):
        if not (directory / name).exists():
            source = f"${DIR_ENV}" if explicit else str(BUILD_SCRIPT)
            raise ClusterApiMissing(f"{name} not found in {directory} (from {source})")
    return directory


def _from_script(build: bool) -> Path:
    if not BUILD_SCRIPT.is_file():
        raise ClusterApiMissing(f"no ${DIR_ENV} and no build script at {BUILD_SCRIPT}")
    try:
        return built_dir(BUILD_SCRIPT, build=build)
    except BuildFailed as failed:
        raise ClusterApiMissing(str(failed)) from None


def install_crds_only(server: Server, workdir: Path, bin_dir: Path | None = None) -> list[str]:
    """Cluster API's CRDs on `server`, Established, with no manager and no webhooks: what a
    test needs to create Clusters, Machines and MachinePools as plain objects (and what
    the controller's informers list). `workdir` receives the fitted copies; `bin_dir` is
    `capi_dir()` by default. Returns the CRDs' names."""
    directory = workdir / "crds"
    directory.mkdir(parents=True, exist_ok=True)
    for source in sorted(((bin_dir or capi_dir()) / "crds").glob("*.yaml")):
        docs = yaml.load_all(source.read_text(), Loader=_LOADER)
        # Written as JSON (which is YAML): dumping 1 MB of YAML in Python takes a second.
        fitted = [json.dumps(served_storage_only(doc)) for doc in docs]
        (directory / source.name).write_text("\n---\n".join(fitted))
    return server.install_crds(directory)


def served_storage_only(crd: Json) -> Json:
    """`crd` with every version but the storage one unserved (see the module docstring)."""
    fitted = copy.deepcopy(crd)
    for version in fitted["spec"]["versions"]:
        version["served"] = bool(version["storage"])
    return fitted


def webhook_configurations(manifests: str, port: int, ca_bundle: bytes) -> list[Json]:
    """The configurations of webhook/manifests.yaml, named `capi-<name>`, calling
    https://127.0.0.1:<port> (trusting `ca_bundle`, PEM) instead of a Service."""
    configurations = []
    for doc in yaml.safe_load_all(manifests):
        if not isinstance(doc, dict) or doc.get("kind") not in _WEBHOOK_CONFIGURATIONS:
            continue
        fitted = copy.deepcopy(doc)
        fitted["metadata"]["name"] = f"capi-{doc['metadata']['name']}"
        for hook in fitted["webhooks"]:
            path = hook["clientConfig"]["service"].get("path", "/")
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": base64.b64encode(ca_bundle).decode(),
            }
        configurations.append(fitted)
    return configurations


def manager_argv(
    binary: Path, *, kubeconfig: Path, cert_dir: Path, webhook: int, health: int, diagnostics: int
) -> list[str]:
    """The manager's command line; `webhook`, `health`, `diagnostics` are its ports."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--webhook-cert-dir={cert_dir}",
        f"--webhook-port={webhook}",
        f"--health-addr=127.0.0.1:{health}",
        f"--diagnostics-address=127.0.0.1:{diagnostics}",
        "--insecure-diagnostics",
        # One instance, throwaway data: a leader Lease only delays the start.
        "--leader-elect=false",
        f"--feature-gates={FEATURE_GATES}",
    ]


def write_serving_cert(directory: Path) -> bytes:
    """A self-signed certificate for 127.0.0.1 (tls.crt, tls.key in `directory`); returns
    its PEM, which is also the webhooks' caBundle. Go's verifier accepts a root as a leaf."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, _ = self_signed(directory, common_name="capi-webhook", days=7)
    return cert.read_bytes()


class ClusterApi(RunsInContext):
    """The core manager on `server`, from `bin_dir` (default: `capi_dir()`, which builds it
    if need be). Nothing starts before `async with`."""

    def __init__(
        self,
        server: Server,
        *,
        bin_dir: Path | None = None,
        startup_timeout: float = STARTUP_TIMEOUT_SECONDS,
    ) -> None:
        self._server = server
        self._bin_dir = bin_dir
        self._startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        #: The CRDs installed, by name.
        self.crds: list[str] = []
        #: Seconds from starting the manager to its /readyz answering.
        self.startup_seconds = 0.0
        #: Its Prometheus metrics, plain HTTP (--insecure-diagnostics).
        self.metrics_url = ""

    @property
    def workdir(self) -> Path:
        return self._server.workdir / "capi"

    @property
    def log(self) -> Path:
        return self.workdir / "manager.log"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("ClusterApi is not running: use it as an async context manager")
        return self._proc.pid

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ClusterApi]:
        """Install, start and wait for /readyz; on leaving, stop the manager (SIGTERM, then
        SIGKILL after a grace period) and delete the webhook configurations."""
        bin_dir = self._bin_dir
        if bin_dir is None:
            bin_dir = await anyio.to_thread.run_sync(capi_dir)
        webhook, (health, diagnostics) = free_port(), process.free_ports(2)
        ca_bundle = await anyio.to_thread.run_sync(self._install_crds, bin_dir)
        manifests = (bin_dir / "webhook" / "manifests.yaml").read_text()
        configurations = webhook_configurations(manifests, webhook, ca_bundle)
        try:
            await anyio.to_thread.run_sync(self._apply, configurations)
            argv = manager_argv(
                bin_dir / "manager",
                kubeconfig=self._server.kubeconfig,
                cert_dir=self.workdir / "serving-certs",
                webhook=webhook,
                health=health,
                diagnostics=diagnostics,
            )
            # Spawned on this thread, not a worker: the child dies with its spawning thread.
            self._proc = process.spawn(argv, self.log)
            try:
                await self._wait_ready(self._proc, health)
                self.metrics_url = f"http://127.0.0.1:{diagnostics}/metrics"
                yield self
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(process.stop, self._proc)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._uninstall, configurations)

    def _install_crds(self, bin_dir: Path) -> bytes:
        """CRDs, until Established, and the serving certificate, whose PEM it returns."""
        self.crds = install_crds_only(self._server, self.workdir, bin_dir)
        return write_serving_cert(self.workdir / "serving-certs")

    def _apply(self, configurations: list[Json]) -> None:
        for obj in configurations:
            self._server.request(
                "PATCH", _path(obj), obj, "application/apply-patch+yaml", params=_APPLY
            )

    def _uninstall(self, configurations: list[Json]) -> None:
        for obj in configurations:
            try:
                self._server.request("DELETE", _path(obj))
            except RequestFailed as error:
                if error.status != 404:
                    raise

    async def _wait_ready(self, proc: subprocess.Popen[bytes], health: int) -> None:
        probe = Client(f"http://127.0.0.1:{health}", None)
        started = time.monotonic()
        deadline = started + self._startup_timeout
        while not await anyio.to_thread.run_sync(probe.ok, "/readyz"):
            if proc.poll() is not None:
                raise StartupFailed(self._failure(f"exited with status {proc.returncode}"))
            if time.monotonic() > deadline:
                raise StartupFailed(self._failure(f"not ready after {self._startup_timeout:.0f}s"))
            await anyio.sleep(_POLL_SECONDS)
        self.startup_seconds = time.monotonic() - started

    def _failure(self, what: str) -> str:
        return f"Cluster API manager {what}; log: {self.log}\n{process.log_tail(self.log)}"


def _path(obj: Json) -> str:
    return resource_path(_WEBHOOK_CONFIGURATIONS[obj["kind"]], None, obj["metadata"]["name"])
