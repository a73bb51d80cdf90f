"""Which runner releases this controller runs: the version skew policy (docs/upgrading.md).

A runner reports its result in a shape the controller checks key by key
(controller/core/jobs/termination.py) and keeps state in a layout the controller reads;
each release may add to both, never change what is there. So a controller reads what a
runner of its own release writes, and of the release before (the runners a rolling
upgrade leaves behind, and objects whose spec.jobs.image still names the older image);
a runner of a newer release may write what it cannot read, and one two releases older
was never run against it. Both are refused before a Job starts, as JobPolicyInvalid
naming the image and the releases. A release is major.minor: patch releases of one
series are the same runner.

The runner's release is read from the image's tag when the image is CAPTF's own (its
repository's last part is `captf`): `captf:v0.1.0`, `ghcr.io/captf-io/captf:v0.2.3`.
A tag that names no release (`dev`, `latest`, a digest alone) and an image of another
repository (a runner built on ours) are not checked: their operator keeps them in step."""

from __future__ import annotations

import re
from typing import Final

from controller.core.basics.release import RELEASE

RUNNER_REPOSITORY: Final = "captf"
_TAG = re.compile(r"v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-+][0-9A-Za-z.+-]*)?")


def release_of(version: str) -> tuple[int, int] | None:
    """(major, minor) of `v0.2.1` or `0.2.1` (a pre-release suffix allowed); None else."""
    found = _TAG.fullmatch(version)
    return (int(found[1]), int(found[2])) if found else None


def runner_release(image: str) -> tuple[int, int] | None:
    """The release of a CAPTF runner image, from its tag; None when it says none."""
    last = image.split("@", 1)[0].rpartition("/")[2]
    repository, _, tag = last.partition(":")
    if repository != RUNNER_REPOSITORY or not tag:
        return None
    return release_of(tag)


def skew_refusal(image: str, controller: str = RELEASE) -> str | None:
    """Why this controller does not run `image`, or None when it does (see above)."""
    runner, mine = runner_release(image), release_of(controller)
    if runner is None or mine is None:
        return None
    older = (mine[0], mine[1] - 1)
    if runner in (mine, older):
        return None
    shown = f"{runner[0]}.{runner[1]}"
    if runner > mine:
        return (
            f"spec.jobs.image {image!r} is a runner of release {shown}, newer than this"
            f" controller ({controller}): upgrade the controller first (docs/upgrading.md)"
        )
    return (
        f"spec.jobs.image {image!r} is a runner of release {shown}; this controller"
        f" ({controller}) runs its own release's and the one before: name a newer runner"
        " image (docs/upgrading.md)"
    )
