"""etcd plus kube-apiserver on loopback, and optionally kube-controller-manager, started
and stopped as one context manager.

Everything lives in a fresh temporary directory: certificates, etcd's data,
both processes' logs and (unless a path is given) the kubeconfig. Leaving the
`with` block -- normally, by an exception, by Ctrl-C, or at interpreter exit --
stops kube-apiserver, then etcd, then removes the directory. When startup fails
the directory is kept, and the error names the log to read."""

from __future__ import annotations

import atexit
import base64
import contextlib
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from runtime.envtest import crds, process
from runtime.envtest.binaries import binary_dir
from runtime.envtest.client import Client, RequestFailed, admin_ssl_context
from runtime.envtest.controller_manager import controller_manager_argv
from runtime.envtest.kubeconfig import write_kubeconfig
from runtime.envtest.pki import Pki, write_pki

_AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  # kube-controller-manager's controllers (when it runs) are not what a test audits.
  - level: None
    userGroups: ["system:serviceaccounts:kube-system"]
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""
_POLL_SECONDS = 0.05
# kube-apiserver needs 5-15 s on two cores; a first start after a build may need more.
STARTUP_TIMEOUT_SECONDS = 90.0


class StartupFailed(Exception):
    pass


@dataclass
class _Running:
    """State that exists only between __enter__ and __exit__."""

    bin_dir: Path
    workdir: Path
    pki: Pki
    etcd_url: str
    url: str
    kubeconfig: Path
    api: Client
    etcd_api: Client
    etcd: subprocess.Popen[bytes] | None = None
    apiserver: subprocess.Popen[bytes] | None = None
    controller_manager: subprocess.Popen[bytes] | None = None


class ApiServer:
    """A real control plane for tests and local runs. Nothing starts before `with`.

    `kubeconfig`: where to write the admin kubeconfig (default: inside the
    temporary directory). `extra_flags`: appended to kube-apiserver's flags.
    `controller_manager`: also run kube-controller-manager (Job, Deployment, garbage
    collection, disruption, ServiceAccount controllers; see `controller_manager.py`)
    and admit pods as a cluster does (the ServiceAccount admission plugin). Without it
    nothing acts on Jobs or pods, and tests play those parts themselves."""

    def __init__(
        self,
        *,
        kubeconfig: Path | None = None,
        bin_dir: Path | None = None,
        extra_flags: Sequence[str] = (),
        startup_timeout: float = STARTUP_TIMEOUT_SECONDS,
        controller_manager: bool = False,
    ) -> None:
        self._kubeconfig = kubeconfig
        self._bin_dir = bin_dir
        self._extra_flags = tuple(extra_flags)
        self._startup_timeout = startup_timeout
        self._with_controller_manager = controller_manager
        self._run: _Running | None = None
        self._stack = contextlib.ExitStack()
        self._keep_workdir = False
        #: Seconds from creating the directory to /readyz answering (build check excluded).
        self.startup_seconds = 0.0
        #: Seconds from starting kube-controller-manager to its being ready (0 without it).
        self.controller_manager_seconds = 0.0

    # -- lifecycle --------------------------------------------------------------

    def __enter__(self) -> ApiServer:
        try:
            self._start()
        except BaseException:
            self._keep_workdir = True
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop both processes and remove the directory; idempotent."""
        atexit.unregister(self.close)
        self._stack.close()
        self._run = None

    def _start(self) -> None:
        bin_dir = self._bin_dir or binary_dir()
        started = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="captf-envtest-"))
        self._stack.callback(self._remove_workdir, workdir)
        # Registered before any child exists: interpreter exit (for instance after a
        # KeyboardInterrupt that skipped fixture teardown) still stops them in order.
        atexit.register(self.close)
        (workdir / "pki").mkdir()
        pki = write_pki(workdir / "pki")
        etcd_port, peer_port, port, kcm_port = process.free_ports(4)
        url = f"https://127.0.0.1:{port}"
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        run = self._run = _Running(
            bin_dir=bin_dir,
            workdir=workdir,
            pki=pki,
            etcd_url=etcd_url,
            url=url,
            kubeconfig=self._kubeconfig or workdir / "kubeconfig",
            api=Client(url, admin_ssl_context(pki)),
            etcd_api=Client(etcd_url, None),
        )
        self._stack.callback(self._stop_etcd)
        self._stack.callback(self._stop_apiserver)
        self._stack.callback(self._stop_controller_manager)
        run.etcd = process.spawn(self._etcd_argv(peer_port), self.etcd_log)
        self._wait("etcd", run.etcd, self.etcd_log, lambda: run.etcd_api.ok("/health"))
        self._start_apiserver()
        write_kubeconfig(run.kubeconfig, url, pki)
        self.startup_seconds = time.monotonic() - started
        if self._with_controller_manager:
            self._start_controller_manager(kcm_port)

    def _start_controller_manager(self, port: int) -> None:
        run = self._running()
        started = time.monotonic()
        kubeconfig = run.workdir / "controller-manager.kubeconfig"
        pki = run.pki
        cert, key = pki.controller_manager_cert, pki.controller_manager_key
        write_kubeconfig(kubeconfig, run.url, pki, cert=cert, key=key)
        argv = controller_manager_argv(
            run.bin_dir / "kube-controller-manager",
            kubeconfig=kubeconfig,
            pki=pki,
            port=port,
            workdir=run.workdir,
        )
        run.controller_manager = process.spawn(argv, self.controller_manager_log)
        health = Client(f"https://127.0.0.1:{port}", _unverified_context())

        def ready() -> bool:
            return health.ok("/healthz") and run.api.ok(
                "/api/v1/namespaces/default/serviceaccounts/default"
            )

        log = self.controller_manager_log
        self._wait("kube-controller-manager", run.controller_manager, log, ready)
        self.controller_manager_seconds = time.monotonic() - started

    def _etcd_argv(self, peer_port: int) -> list[str]:
        run = self._running()
        peer = f"http://127.0.0.1:{peer_port}"
        return [
            str(run.bin_dir / "etcd"),
            "--name=envtest",
            f"--data-dir={run.workdir / 'etcd'}",
            f"--listen-client-urls={run.etcd_url}",
            f"--advertise-client-urls={run.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=envtest={peer}",
            # Throwaway data: durability buys nothing and fsync costs seconds per test run.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def _apiserver_argv(self) -> list[str]:
        run = self._running()
        pki = run.pki
        port = run.url.rsplit(":", 1)[1]
        return [
            str(run.bin_dir / "kube-apiserver"),
            "--advertise-address=127.0.0.1",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--etcd-servers={run.etcd_url}",
            f"--cert-dir={run.workdir / 'certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={run.url}",
            f"--service-account-key-file={pki.sa_public_key}",
            f"--service-account-signing-key-file={pki.sa_signing_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            *self._admission_flags(),
            "--allow-privileged=true",
            # The `kubernetes` Service's Endpoints may not hold a loopback address.
            "--endpoint-reconciler-type=none",
            # One resource read straight from etcd, bypassing the watch cache, so a
            # watch from a compacted revision answers as etcd does (410).
            "--watch-cache-sizes=podtemplates#0",
            # Every request a ServiceAccount makes, at Metadata level (who, verb, resource,
            # answer code): what a least-privilege check reads. Admin requests are not logged.
            f"--audit-policy-file={self._audit_policy()}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-mode=blocking",
            *self._extra_flags,
        ]

    def _audit_policy(self) -> Path:
        path = self._running().workdir / "audit-policy.yaml"
        path.write_text(_AUDIT_POLICY)
        return path

    def _admission_flags(self) -> list[str]:
        if self._with_controller_manager:
            return []
        # No controller manager runs to create the ServiceAccounts the plugin requires.
        return ["--disable-admission-plugins=ServiceAccount"]

    def _start_apiserver(self) -> None:
        run = self._running()
        run.apiserver = process.spawn(self._apiserver_argv(), self.apiserver_log)
        proc = run.apiserver
        self._wait("kube-apiserver", proc, self.apiserver_log, lambda: run.api.ok("/readyz"))

    def _wait(
        self, what: str, proc: subprocess.Popen[bytes], log: Path, ready: Callable[[], bool]
    ) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while not ready():
            if proc.poll() is not None:
                raise StartupFailed(
                    f"{what} exited with status {proc.returncode}; log: {log}\n"
                    f"{process.log_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise StartupFailed(
                    f"{what} not ready after {self._startup_timeout:.0f}s; log: {log}\n"
                    f"{process.log_tail(log)}"
                )
            time.sleep(_POLL_SECONDS)

    def _stop_apiserver(self) -> None:
        if self._run is not None and self._run.apiserver is not None:
            process.stop(self._run.apiserver)

    def _stop_controller_manager(self) -> None:
        if self._run is not None and self._run.controller_manager is not None:
            process.stop(self._run.controller_manager)

    def _stop_etcd(self) -> None:
        if self._run is not None and self._run.etcd is not None:
            process.stop(self._run.etcd)

    def _remove_workdir(self, workdir: Path) -> None:
        if not self._keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    def _running(self) -> _Running:
        if self._run is None:
            raise RuntimeError("ApiServer is not running: use it as a context manager")
        return self._run

    # -- what tests and tools use -----------------------------------------------

    @property
    def url(self) -> str:
        return self._running().url

    @property
    def etcd_url(self) -> str:
        return self._running().etcd_url

    @property
    def kubeconfig(self) -> Path:
        return self._running().kubeconfig

    @property
    def workdir(self) -> Path:
        return self._running().workdir

    @property
    def pki(self) -> Pki:
        return self._running().pki

    @property
    def etcd_log(self) -> Path:
        return self._running().workdir / "etcd.log"

    @property
    def apiserver_log(self) -> Path:
        return self._running().workdir / "kube-apiserver.log"

    @property
    def audit_log(self) -> Path:
        """JSON lines, one per request by a ServiceAccount (stages ResponseStarted for
        watches and ResponseComplete), at Metadata level."""
        return self._running().workdir / "audit.log"

    @property
    def controller_manager_log(self) -> Path:
        return self._running().workdir / "kube-controller-manager.log"

    @property
    def logs(self) -> list[Path]:
        """The log of every process this server runs."""
        logs = [self.etcd_log, self.apiserver_log]
        return [*logs, self.controller_manager_log] if self._with_controller_manager else logs

    @property
    def pids(self) -> dict[str, int]:
        """The process id of each server process running, by its binary's name."""
        run = self._running()
        procs = {
            "etcd": run.etcd,
            "kube-apiserver": run.apiserver,
            "kube-controller-manager": run.controller_manager,
        }
        return {name: proc.pid for name, proc in procs.items() if proc is not None}

    def alive(self) -> bool:
        """Every process is still running."""
        run = self._running()
        procs = [run.etcd, run.apiserver]
        if self._with_controller_manager:
            procs.append(run.controller_manager)
        return all(p is not None and p.poll() is None for p in procs)

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        content_type: str = "application/json",
        *,
        params: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """A synchronous call as the admin; raises RequestFailed on a non-2xx answer."""
        return self._running().api.request(
            method, path, body, content_type, params=params, timeout=timeout
        )

    def watch(
        self, path: str, params: Mapping[str, str], *, timeout: float = 30.0
    ) -> contextlib.AbstractContextManager[Iterator[dict[str, Any]]]:
        """A synchronous watch as the admin: `watch=1` is added to `params`."""
        api = self._running().api
        return api.stream(path, {**params, "watch": "1"}, timeout=timeout)

    def install_crds(self, directory: Path, timeout: float = 60.0) -> list[str]:
        """Apply every CRD in `directory` (none if it is missing) and wait until Established."""
        return crds.install_crds(self._running().api, directory, timeout)

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port; etcd keeps the data."""
        run = self._running()
        if run.apiserver is not None:
            process.stop(run.apiserver)
        self._start_apiserver()

    def etcd_compact(self) -> int:
        """Compact etcd at its current revision (waiting until it is physical); returns it."""
        etcd = self._running().etcd_api
        key = base64.b64encode(b"/").decode()
        header = etcd.request("POST", "/v3/kv/range", {"key": key, "count_only": True})
        revision = int(header["header"]["revision"])
        try:
            etcd.request("POST", "/v3/kv/compaction", {"revision": revision, "physical": True})
        except RequestFailed as err:
            # Nothing was written since the last compaction: the log is compact already.
            if "required revision has been compacted" not in err.message:
                raise
        return revision


def _unverified_context() -> ssl.SSLContext:
    # kube-controller-manager serves /healthz with a self-signed certificate of its own.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx
