"""Where a pod's process finds its ServiceAccount: the standard directory, or the one a
process node names in CAPTF_SERVICE_ACCOUNT_DIR."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from controller.io.main import controller_namespace
from runtime.envtest.pki import write_pki
from runtime.incluster import (
    DEFAULT_SERVICE_ACCOUNT_DIR,
    SERVICE_ACCOUNT_DIR_ENV,
    service_account_dir,
)
from runtime.transport import kubeconfig


def test_the_standard_directory_unless_the_node_names_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(SERVICE_ACCOUNT_DIR_ENV, raising=False)
    assert service_account_dir() == DEFAULT_SERVICE_ACCOUNT_DIR
    monkeypatch.setenv(SERVICE_ACCOUNT_DIR_ENV, str(tmp_path))
    assert service_account_dir() == tmp_path


async def test_in_cluster_config_and_namespace_come_from_the_named_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "token").write_text("pod-token")
    (tmp_path / "namespace").write_text("team-a\n")
    monkeypatch.setenv(SERVICE_ACCOUNT_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "pki").mkdir()
    shutil.copy(write_pki(tmp_path / "pki").ca_cert, tmp_path / "ca.crt")
    loaded = kubeconfig.load(None)
    assert loaded.host == "https://127.0.0.1:6443"
    assert await loaded.credentials.headers() == {"Authorization": "Bearer pod-token"}
    assert controller_namespace(None) == "team-a"
