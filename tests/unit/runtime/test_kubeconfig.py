"""The kubeconfig reader: which credentials each user entry gives, and what it refuses.

TLS with client certificates and an embedded CA is exercised by every kube test
(the envtest kubeconfig carries both); the exec plugin by test_transport.py."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ConfigError
from runtime.transport import kubeconfig
from runtime.transport.kubeconfig import StaticHeader, TokenFile, from_kubeconfig


def config(user: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"} | cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


@pytest.mark.parametrize(
    ("user", "header"),
    [
        ({"token": "t0k"}, "Bearer t0k"),
        ({"username": "ann", "password": "pw"}, "Basic " + base64.b64encode(b"ann:pw").decode()),
    ],
    ids=["token", "basic"],
)
async def test_static_credentials_become_one_header(user: dict[str, Any], header: str) -> None:
    loaded = from_kubeconfig(config(user), Path("/"))
    assert isinstance(loaded.credentials, StaticHeader)
    assert await loaded.credentials.headers() == {"Authorization": header}
    assert await loaded.credentials.refresh() is False


async def test_no_user_means_no_credentials() -> None:
    loaded = from_kubeconfig(config({}), Path("/"))
    assert await loaded.credentials.headers() == {}
    assert loaded.host == "http://127.0.0.1:1"
    assert loaded.ssl is None


async def test_a_token_file_is_read_again_once_a_minute_old(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("one\n")
    now = [0.0]
    loaded = from_kubeconfig(config({"tokenFile": "token"}), tmp_path)
    assert isinstance(loaded.credentials, TokenFile)
    credentials = TokenFile(loaded.credentials.path, clock=lambda: now[0])
    assert await credentials.headers() == {"Authorization": "Bearer one"}
    (tmp_path / "token").write_text("two\n")
    now[0] = 59.0
    assert await credentials.headers() == {"Authorization": "Bearer one"}
    now[0] = 60.0
    assert await credentials.headers() == {"Authorization": "Bearer two"}


def test_insecure_skip_tls_verify_turns_verification_off() -> None:
    loaded = from_kubeconfig(
        config({}, server="https://h:6443", **{"insecure-skip-tls-verify": True}), Path("/")
    )
    assert loaded.ssl is not None
    assert loaded.ssl.check_hostname is False


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda c: c.pop("current-context"), "current-context"),
        (lambda c: c.update(clusters=[]), "no cluster named 'c'"),
        (lambda c: c["clusters"][0]["cluster"].pop("server"), "has no server"),
    ],
    ids=["no-context", "no-cluster", "no-server"],
)
def test_an_unusable_kubeconfig_says_why(mutate: Any, says: str) -> None:
    broken = config({})
    mutate(broken)
    with pytest.raises(ConfigError, match=says):
        from_kubeconfig(broken, Path("/"))


def test_not_in_a_cluster_without_a_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="not running in a cluster"):
        kubeconfig.in_cluster(tmp_path)


def test_in_cluster_reads_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    (tmp_path / "token").write_text("sa")
    ca = subprocess.run(
        [sys.executable, "-c", "import ssl; print(ssl.get_default_verify_paths().cafile)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not ca or not Path(ca).exists():
        pytest.skip("no system CA bundle to stand in for the service account's")
    (tmp_path / "ca.crt").write_bytes(Path(ca).read_bytes())
    loaded = kubeconfig.in_cluster(tmp_path)
    assert loaded.host == "https://10.0.0.1:443"
    assert isinstance(loaded.credentials, TokenFile)


def test_importing_the_transport_does_not_import_the_generated_client() -> None:
    code = (
        "import sys, runtime.transport, controller.io.main; "
        "print(any(m.startswith('kubernetes_asyncio') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
