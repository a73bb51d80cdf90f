"""`captf install-copier DEST`: the runner image's copier, executable, at DEST."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli.main import main


def test_the_copier_lands_executable_and_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "captf-copy"
    source.write_bytes(b"\x7fELF static copier")
    source.chmod(0o600)
    monkeypatch.setenv("CAPTF_COPIER", str(source))
    dest = tmp_path / "copier" / "captf-copy"
    dest.parent.mkdir()
    assert main(["install-copier", str(dest)]) == 0
    assert dest.read_bytes() == source.read_bytes()
    assert dest.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in dest.parent.iterdir()] == ["captf-copy"]


def test_a_missing_copier_fails_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CAPTF_COPIER", str(tmp_path / "absent"))
    assert main(["install-copier", str(tmp_path / "x")]) == 1
    assert "captf install-copier:" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
