"""`captf install-copier DEST`: the first init container of a module image Job's copy shape.

The runner image carries a static copier (`captf-copy`, built from hack/copier by the
Dockerfile, where RunnerVar.COPIER names it); this puts it at DEST, executable, in an
emptyDir the pod shares, so that the next init container, from the module image (which
holds no shell and no copier), can run it to copy the image's /captf for the runner
(docs/module-image.md). Exit 0 once it is there; 1 with one line saying why not."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from controller.core.basics.runner_vars import RunnerVar

# Where the runner image puts the copier (the Dockerfile); $CAPTF_COPIER says otherwise.
DEFAULT_COPIER = "/usr/local/bin/captf-copy"


def install(source: Path, dest: Path) -> None:
    """A copy of `source` at `dest`, mode 0755, written whole (beside it, then renamed)."""
    partial = dest.with_name(dest.name + ".partial")
    shutil.copyfile(source, partial)
    partial.chmod(0o755)
    partial.replace(dest)


def run(args: argparse.Namespace) -> int:
    source = Path(os.environ.get(RunnerVar.COPIER.value) or DEFAULT_COPIER)
    try:
        install(source, Path(args.dest))
    except OSError as err:
        print(f"captf install-copier: {err}", file=sys.stderr)
        return 1
    return 0
