"""What runs the Jobs: the one pluggable piece of the system under test.

A runner is an async context manager given a `Setting`: it talks to the API server
directly (never through a controller's proxy: the faults are aimed at the
controllers). To add one, write a class
of this shape and name it in `RUNNERS`."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import yaml

from controller.dev.node import ProcessNode, default_images
from controller.runner.binaries import runner_environ, tofu_dir
from runtime.errors import ApiError
from runtime.transport import Transport, open_transport

RUNNER_RBAC = Path(__file__).resolve().parents[2] / "manifests" / "runner-rbac.yaml"


@dataclass(frozen=True)
class Setting:
    kubeconfig: Path  # the API server's own, admin
    namespace: str  # the workload's
    controller_namespace: str  # where the time origin is recorded
    time_scale: float
    logs: Path


class JobRunner(Protocol):
    name: str

    def running(self, setting: Setting) -> contextlib.AbstractAsyncContextManager[None]: ...


class NodeRunner:
    """A process node for the workload's namespace, in the harness's own event loop: the
    Job controller (kube-controller-manager, started with the API server) makes the pods,
    the node runs each runner (and OpenTofu) as a local process under the `captf-runner`
    ServiceAccount the controllers provide (manifests/runner-rbac.yaml's ClusterRole).
    Job times are the Job controller's, on the wall clock; the controllers move them onto
    the scaled timeline as they read them (controller/io/jobtimes.py)."""

    name = "node"

    @contextlib.asynccontextmanager
    async def running(self, setting: Setting) -> AsyncIterator[None]:
        # Short: OpenTofu's plugin sockets live under each runner's TMPDIR. Removed at the
        # end, after the node has stopped every pod.
        with tempfile.TemporaryDirectory(prefix="captf-pods-") as pods:
            async with open_transport(str(setting.kubeconfig)) as transport:
                await _grant_runner_rbac(transport, setting.namespace)
                tofu = runner_environ(tofu_dir(build=False))
                async with ProcessNode(
                    transport,
                    images=default_images(tofu),
                    name=f"node-{setting.namespace}"[:63],
                    namespace=setting.namespace,
                    log_dir=setting.logs / "pods",
                    pods_dir=Path(pods),
                ):
                    yield


async def _grant_runner_rbac(transport: Transport, namespace: str) -> None:
    """manifests/runner-rbac.yaml's ClusterRole, once per API server; the controllers
    provide the `captf-runner` ServiceAccount and its RoleBinding in `namespace`."""
    del namespace  # nothing is applied there by hand
    for doc in yaml.safe_load_all(RUNNER_RBAC.read_text()):
        if not doc:
            continue
        try:
            await transport.request(
                "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body=doc
            )
        except ApiError as err:
            if err.status != 409:
                raise


RUNNERS: dict[str, type[JobRunner]] = {"node": NodeRunner}
