"""`captf image build DIR --role ROLE --tag REF`: a module image from a directory, pushed.

The image holds DIR's files as the module, the OpenTofu binary and, of the provider
mirror, the providers the module and its local modules require; the runtime and mirror
are this checkout's OpenTofu build's (hack/tofu/build.sh) unless --runtime and
--providers name others. A required provider the mirror lacks fails the build.
--capacity and --node-info write the scale-from-zero labels io.captf.capacity and
io.captf.node-info (docs/module-image.md); a value of the wrong shape exits 2 unbuilt.
Prints the pushed image's digest on standard output; exit status 1 with the reason on
standard error when the image cannot be built or pushed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from controller.core.contract.capacity import ShapeError, labels_of, parse_pairs
from controller.core.contract.roles import Role
from controller.image.build import BuildError, build_and_push
from controller.runner.binaries import TofuMissing, tofu_dir

MIRROR = "mirror"


def run(args: argparse.Namespace) -> int:
    try:
        extra = _capacity_labels(args.capacity, args.node_info)
        runtime, providers = _binaries(args.runtime, args.providers)
        digest = build_and_push(
            Path(args.directory),
            Role(args.role),
            args.tag,
            runtime=runtime,
            providers=providers,
            extra_labels=extra,
        )
    except ShapeError as err:
        print(f"captf image build: --capacity/--node-info: {err}", file=sys.stderr)
        return 2
    except (BuildError, TofuMissing) as err:
        print(f"captf image build: {err}", file=sys.stderr)
        return 1
    print(digest)
    return 0


def _capacity_labels(capacity: str | None, node_info: str | None) -> dict[str, str]:
    """`io.captf.capacity` and `io.captf.node-info` from `cpu=4,memory=16Gi` and
    `architecture=amd64,operatingSystem=linux` (or JSON objects); checked before building."""
    return labels_of(
        parse_pairs(capacity) if capacity is not None else None,
        parse_pairs(node_info) if node_info is not None else None,
    )


def _binaries(runtime: str | None, providers: str | None) -> tuple[Path, Path | None]:
    """The runtime and mirror given, else the local OpenTofu build's (built if missing)."""
    if runtime is not None and providers is not None:
        return Path(runtime), Path(providers)
    built = tofu_dir()
    return (
        Path(runtime) if runtime is not None else built / "tofu",
        Path(providers) if providers is not None else built / MIRROR,
    )
