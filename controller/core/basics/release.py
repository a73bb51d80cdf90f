"""This checkout's release: the version its controller and runner images are tagged with,
its clusterctl release and Helm chart (docs/upgrading.md). pyproject.toml's version is the
same; a unit test holds the two together."""

from __future__ import annotations

from typing import Final

RELEASE: Final = "0.2.0"
