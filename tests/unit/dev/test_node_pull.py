"""The puller's failures that need no registry: no crane, crane failing, crane hanging."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.dev.node import pull
from controller.dev.node.pull import Puller, PullFailed

IMAGE = "127.0.0.1:1/mod:v1"


def fake_crane(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "crane"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


async def test_without_a_crane_build_every_pull_fails_saying_so(tmp_path: Path) -> None:
    with pytest.raises(PullFailed, match="no crane build") as failed:
        await Puller(tmp_path / "cache", None).pull(IMAGE, "IfNotPresent")
    assert failed.value.reason == "ErrImagePull"


async def test_cranes_last_error_line_is_the_message(tmp_path: Path) -> None:
    crane = fake_crane(tmp_path, 'echo "first" >&2; echo "Error: MANIFEST_UNKNOWN: v1" >&2; exit 1')
    with pytest.raises(PullFailed, match=r"^crane digest 127.0.0.1:1/mod:v1: Error: MANIFEST"):
        await Puller(tmp_path / "cache", crane).pull(IMAGE, "IfNotPresent")


async def test_a_crane_that_hangs_is_a_failed_pull(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pull, "CRANE_TIMEOUT_SECONDS", 0.2)
    crane = fake_crane(tmp_path, "exec sleep 30")
    with pytest.raises(PullFailed, match=r"no answer in 0\.2s"):
        await Puller(tmp_path / "cache", crane).pull(IMAGE, "Always")


async def test_crane_never_sees_the_users_own_logins(tmp_path: Path) -> None:
    seen = tmp_path / "env"
    crane = fake_crane(tmp_path, f'env > "{seen}"; exit 1')
    with pytest.raises(PullFailed):
        await Puller(tmp_path / "cache", crane).pull(IMAGE, "Always")
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert env["DOCKER_CONFIG"].startswith(env["HOME"])
    assert "captf-crane-" in env["DOCKER_CONFIG"]
