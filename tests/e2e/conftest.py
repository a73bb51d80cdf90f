"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from runtime.envtest import ApiServer
from tests.e2e.system import System, in_background, running_system


@pytest_asyncio.fixture(loop_scope="function")
async def system(
    tofu_build: Path, cluster: ApiServer, cluster_namespace: str, tmp_path: Path
) -> AsyncIterator[System]:
    """The controller on LoopClock(60) and a process node, in the test's event loop."""
    started, stop = await in_background(
        running_system(cluster, cluster_namespace, tmp_path, tofu_build)
    )
    try:
        yield started
    finally:
        await stop()


@pytest_asyncio.fixture(loop_scope="function")
async def image_system(
    tofu_build: Path,
    registry_build: Path,
    cluster: ApiServer,
    cluster_namespace: str,
    tmp_path: Path,
) -> AsyncIterator[System]:
    """The e2e system whose process node pulls image volumes with the registry build's crane."""
    started, stop = await in_background(
        running_system(cluster, cluster_namespace, tmp_path, tofu_build, registry_build / "crane")
    )
    try:
        yield started
    finally:
        await stop()
