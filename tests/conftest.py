"""Fixtures shared by every test that needs the real API server or the OpenTofu build.

The server starts on first use: a run of unit tests alone never builds or
starts anything."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from controller.dev.clusterapi import install_crds_only
from controller.runner.binaries import TofuMissing, tofu_dir
from runtime.envtest import ApiServer
from runtime.envtest.process import terminate_as_interrupt

CRD_DIR = Path(__file__).resolve().parents[1] / "manifests" / "crds"

# No per-example deadline: it is a timed assertion, and a loaded 2-core CI machine trips
# it on examples that are merely slow there. A failure still prints its seed to replay.
settings.register_profile("captf", deadline=None, print_blob=True)
settings.load_profile("captf")


@pytest.fixture(scope="session")
def apiserver() -> Iterator[ApiServer]:
    """etcd and kube-apiserver for the whole session, with manifests/crds/*.yaml and Cluster
    API's CRDs Established (the controller watches Clusters, Machines and MachinePools)."""
    with terminate_as_interrupt(), ApiServer() as server:
        server.install_crds(CRD_DIR)
        install_crds_only(server, server.workdir / "capi")
        yield server


@pytest.fixture(scope="session")
def cluster() -> Iterator[ApiServer]:
    """A control plane with kube-controller-manager (the real Job, Deployment, GC and
    disruption controllers), CRDs Established: for tests with a process node. Separate
    from `apiserver`, where tests play the Job controller themselves."""
    with terminate_as_interrupt(), ApiServer(controller_manager=True) as server:
        server.install_crds(CRD_DIR)
        install_crds_only(server, server.workdir / "capi")
        yield server


def _new_namespace(server: ApiServer, request: pytest.FixtureRequest) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = f"{stem or 'test'}-{uuid.uuid4().hex[:8]}"
    server.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    return name


@pytest.fixture
def namespace(apiserver: ApiServer, request: pytest.FixtureRequest) -> str:
    """A fresh namespace named after the test.

    Not deleted afterwards: without a namespace controller deletion would never
    finish, and unique names already keep tests apart."""
    return _new_namespace(apiserver, request)


@pytest.fixture
def cluster_namespace(cluster: ApiServer, request: pytest.FixtureRequest) -> str:
    """A fresh namespace of `cluster`, named after the test."""
    return _new_namespace(cluster, request)


@pytest.fixture(scope="session")
def tofu_build() -> Path:
    """The OpenTofu build directory; the test skips when there is none. Session-scoped, and
    asked for before `apiserver`, so a missing build skips before the API server starts."""
    try:
        return tofu_dir(build=False)
    except TofuMissing as exc:
        pytest.skip(f"no OpenTofu build ({exc}); build it with hack/tofu/build.sh")
