"""Where the repository is, for tests that read its files (manifests, examples, docs)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
