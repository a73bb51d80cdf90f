"""Fixtures of the AWS tests: the provider build (skipped without it), moto behind the
fault proxy, the three role images of modules/aws pushed once per session, and the
whole system (controller, process node) whose runners reach moto as AWS."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from controller.core.contract.roles import Role
from controller.dev.module_images import layer_cache
from controller.image import build
from runtime.builds import BuildFailed, built_dir
from runtime.envtest import ApiServer
from runtime.envtest.registry import Registry
from tests.aws.fault_proxy import FaultProxy
from tests.aws.moto import Moto, moto_server
from tests.e2e.system import System, in_background, running_system

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "modules" / "aws"
AWS_SCRIPT = ROOT / "hack" / "aws" / "build.sh"
ROLES = ("cluster", "machine", "machinepool")


NOT_BUILT = "no AWS provider build: `make aws` builds it (about 2,500 CPU-s, 9 GB)"


def _built() -> Path | None:
    try:
        return built_dir(AWS_SCRIPT, build=False)
    except BuildFailed:
        return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Without the provider, every `aws` test is skipped before any of its fixtures
    starts an API server or a registry."""
    if _built() is None:
        for item in items:
            if item.get_closest_marker("aws") is not None:
                item.add_marker(pytest.mark.skip(reason=NOT_BUILT))


@pytest.fixture(scope="session")
def aws_build() -> Path:
    """The AWS provider's build (hack/aws)."""
    built = _built()
    if built is None:
        pytest.skip(NOT_BUILT)
    return built


@pytest.fixture
def moto(tmp_path: Path) -> Iterator[Moto]:
    """moto's server, fresh for the test."""
    with moto_server(tmp_path / "moto.log") as running:
        yield running


@pytest.fixture
def proxy(moto: Moto) -> Iterator[FaultProxy]:
    """The fault proxy in front of moto: the endpoint the runners are given."""
    with FaultProxy(moto.url) as running:
        yield running


@pytest.fixture(scope="session")
def aws_images(aws_build: Path, tofu_build: Path, registry: Registry) -> dict[str, str]:
    """Each role of modules/aws as a module image in the test registry (by tag), as
    `captf image build` makes it with the AWS build's mirror: three images, one provider
    layer. Layers come from the module-layer cache when built before."""
    images = {}
    for role in ROLES:
        planned = build.plan(
            MODULES / role,
            Role(role),
            runtime=tofu_build / "tofu",
            providers=aws_build / "mirror",
        )
        tag = f"{registry.host}/aws-modules/{role}:{planned.key[:16]}"
        started = time.monotonic()
        build.push(planned, tag, layers=layer_cache())
        print(f"pushed {tag} in {time.monotonic() - started:.1f}s")
        images[role] = tag
    return images


@pytest.fixture(scope="session")
def image_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The process node's image cache for the session: the first test pulls the
    provider's layer, the others find the images there, as a node would."""
    return tmp_path_factory.mktemp("node-images")


@pytest_asyncio.fixture(loop_scope="function")
async def aws_system(
    tofu_build: Path,
    registry_build: Path,
    cluster: ApiServer,
    cluster_namespace: str,
    tmp_path: Path,
    image_cache: Path,
) -> AsyncIterator[System]:
    """The controller and a process node that pulls module images; its runners start the
    AWS provider, so at most three run at once."""
    started, stop = await in_background(
        running_system(
            cluster,
            cluster_namespace,
            tmp_path,
            tofu_build,
            registry_build / "crane",
            images_dir=image_cache,
            max_concurrent_runs=3,
        )
    )
    try:
        yield started
    finally:
        await stop()
