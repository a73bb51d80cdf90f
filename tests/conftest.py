"""Fixtures shared by every test that needs the real API server or the OpenTofu build.

The server starts on first use: a run of unit tests alone never builds or
starts anything."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from hypothesis import settings

from controller.dev.clusterapi import ClusterApi, install_crds_only
from controller.dev.install import LoopbackWebhook
from controller.runner.binaries import TofuMissing, tofu_dir
from runtime.envtest import ApiServer
from runtime.envtest.process import terminate_as_interrupt
from runtime.envtest.registry import Registry, RegistryMissing, registry_dir
from tests.capi_support import capi_build_or_skip, install_control_plane_crd
from tests.conversion_support import current_crds, threaded_conversion, write_crds
from tests.registry_support import REGISTRY_USER, htpasswd

CRD_DIR = Path(__file__).resolve().parents[1] / "manifests" / "crds"

# No per-example deadline: it is a timed assertion, and a loaded 2-core CI machine trips
# it on examples that are merely slow there. A failure still prints its seed to replay.
settings.register_profile("captf", deadline=None, print_blob=True)
settings.load_profile("captf")


@pytest.fixture(autouse=True)
def _root_logger_kept() -> Iterator[None]:
    """What a test leaves on the root logger goes with it. `captf run` in process (and the
    dev tools' basicConfig) give the root logger a handler on the stderr of that moment:
    the test's capture, closed when the test ends, after which every log record of a
    later test in the process prints a logging error into that test's own stderr. So a
    plain StreamHandler added during the test is taken off after it (pytest's own
    handlers are subclasses, and pytest takes them off itself), and the level is put back."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if type(handler) is logging.StreamHandler and handler not in before:
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="session")
def conversion_webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackWebhook]:
    """The controller's CRD conversion webhook on loopback for the whole session, which the
    session's API servers call for whatever is read or written as v1alpha1."""
    with threaded_conversion(tmp_path_factory.mktemp("conversion-webhook")) as webhook:
        yield webhook


def _our_crds(server: ApiServer, webhook: LoopbackWebhook) -> None:
    server.install_crds(write_crds(current_crds(webhook), server.workdir / "captf-crds"))


@pytest.fixture(scope="session")
def apiserver(conversion_webhook: LoopbackWebhook) -> Iterator[ApiServer]:
    """etcd and kube-apiserver for the whole session, with manifests/crds/*.yaml (converting
    through `conversion_webhook`) and Cluster API's CRDs Established (the controller
    watches Clusters, Machines and MachinePools)."""
    with terminate_as_interrupt(), ApiServer() as server:
        _our_crds(server, conversion_webhook)
        install_crds_only(server, server.workdir / "capi")
        yield server


@pytest.fixture(scope="session")
def cluster(conversion_webhook: LoopbackWebhook) -> Iterator[ApiServer]:
    """A control plane with kube-controller-manager (the real Job, Deployment, GC and
    disruption controllers), CRDs Established: for tests with a process node. Separate
    from `apiserver`, where tests play the Job controller themselves."""
    with terminate_as_interrupt(), ApiServer(controller_manager=True) as server:
        _our_crds(server, conversion_webhook)
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


@pytest.fixture(scope="session")
def registry_build() -> Path:
    """The registry and crane build (hack/registry); the test skips when there is none."""
    try:
        return registry_dir(build=False)
    except RegistryMissing as exc:
        pytest.skip(f"no registry build ({exc}); build it with hack/registry/build.sh")


@pytest.fixture(scope="session")
def registry(registry_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """An OCI registry on loopback for the whole session, without authentication; its
    storage lives in the session's temporary directory. Tests push to repositories of
    their own (named after the test), so they never see each other's images."""
    workdir = tmp_path_factory.mktemp("registry")
    with terminate_as_interrupt(), Registry(workdir, bin_dir=registry_build) as running:
        yield running


@pytest.fixture(scope="session")
def auth_registry(
    registry_build: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    """A second registry that wants HTTP basic auth (htpasswd) of REGISTRY_USER."""
    workdir = tmp_path_factory.mktemp("auth-registry")
    try:
        users = htpasswd(workdir / "htpasswd", *REGISTRY_USER)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with (
        terminate_as_interrupt(),
        Registry(workdir, bin_dir=registry_build, htpasswd=users) as running,
    ):
        yield running


@pytest.fixture(scope="session")
def capi_build() -> Path:
    """The Cluster API build (hack/capi); the test skips when there is none. Asked for
    before `cluster`, so a missing build skips before any server starts."""
    return capi_build_or_skip()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def capi_cluster(
    capi_build: Path, cluster: ApiServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ClusterApi]:
    """Cluster API's core manager on `cluster`, from the first test that asks until the
    session ends, with the ExampleControlPlane CRD of tests/capi_support.py.

    Session-scoped because it can be: between setup and teardown ClusterApi holds a child
    process and paths, nothing bound to an event loop, so tests in their own loops share
    it; and its setup runs in the session loop on the main thread, where a spawned child
    is armed to die with us. It must be the only ClusterApi on `cluster`: two managers
    would reconcile the same objects, and the first to stop would delete the webhook
    configurations the other serves. Tests that use it are marked `capi` (and `kube`)."""
    crds = tmp_path_factory.mktemp("capi-cluster-crds")
    await asyncio.to_thread(install_control_plane_crd, cluster, crds)
    async with ClusterApi(cluster, bin_dir=capi_build) as running:
        yield running
