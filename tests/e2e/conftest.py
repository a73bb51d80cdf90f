"""Fixtures of the end-to-end tests, which run the real OpenTofu build."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.runner.binaries import TofuMissing, tofu_dir


@pytest.fixture(scope="session")
def tofu_build() -> Path:
    """The OpenTofu build directory; the test skips when there is none. Session-scoped, and
    asked for before `apiserver`, so a missing build skips before the API server starts."""
    try:
        return tofu_dir(build=False)
    except TofuMissing as exc:
        pytest.skip(f"no OpenTofu build ({exc}); build it with hack/tofu/build.sh")
