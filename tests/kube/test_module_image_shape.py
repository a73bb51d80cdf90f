"""--module-image-mount=auto asks the real API server: one that keeps image volumes gets
the volume shape, one whose ImageVolume feature gate is off (v1.35 all the same) the copy
shape, and one that refuses the dry run goes by the version and says so."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.io.config import ControllerConfig
from controller.io.image_volumes import leading_settings
from runtime.envtest import ApiServer
from runtime.envtest.process import terminate_as_interrupt
from runtime.transport import open_transport
from tests.conftest import _new_namespace
from tests.kube.harness import Kube
from tests.kube.test_rbac_audit import _token_kubeconfig

pytestmark = pytest.mark.kube


@pytest.fixture(scope="module")
def gated_off() -> Iterator[ApiServer]:
    """An API server of the same version with image volumes turned off."""
    gate = "--feature-gates=ImageVolume=false"
    with terminate_as_interrupt(), ApiServer(extra_flags=[gate]) as server:
        yield server


async def _shape(kubeconfig: Path, namespace: str, config: ControllerConfig) -> str:
    async with open_transport(str(kubeconfig)) as api:
        settings = await leading_settings(config, api, namespace)
    return settings.module_image_mount


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "module images" in r.getMessage()]


async def test_auto_takes_the_shape_the_api_server_keeps(
    apiserver: ApiServer,
    gated_off: ApiServer,
    namespace: str,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="captf")
    auto = ControllerConfig()
    assert await _shape(apiserver.kubeconfig, namespace, auto) == "volume"
    [line] = _said(caplog)
    assert "the volume shape (API server v1.35, keeps image volumes" in line
    caplog.clear()

    # The same version with the gate off: the version alone would say volume.
    other = _new_namespace(gated_off, request)
    assert await _shape(gated_off.kubeconfig, other, auto) == "copy"
    [line] = _said(caplog)
    assert "the copy shape (API server v1.35, drops image volumes" in line
    caplog.clear()

    # A controller watching namespaces asks in the first of them (its Roles are there).
    watching = ControllerConfig(namespaces=other)
    assert await _shape(gated_off.kubeconfig, "not-a-namespace", watching) == "copy"
    # The flag's own shape is not asked about.
    assert (
        await _shape(gated_off.kubeconfig, other, ControllerConfig(module_image_mount="volume"))
        == "volume"
    )
    assert _said(caplog)[-1].endswith("--module-image-mount=volume)")


async def test_a_refused_dry_run_goes_by_the_version_and_says_so(
    apiserver: ApiServer, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="captf")
    kube = Kube(apiserver, namespace)
    body = {"metadata": {"name": "no-jobs"}}
    await kube.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body)
    kubeconfig = await _token_kubeconfig(kube, apiserver, "no-jobs", tmp_path / "kc")
    assert await _shape(kubeconfig, namespace, ControllerConfig()) == "volume"
    refused, chosen = _said(caplog)
    assert f"a dry-run Job in namespace {namespace} was refused (403 Forbidden" in refused
    assert "the version decides" in refused
    assert "the volume shape (API server v1.35, --module-image-mount=auto)" in chosen
