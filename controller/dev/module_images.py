"""The module images `make run` runs, pushed to its registry before the objects exist.

Each role module (examples/modules/<role>, or `--modules DIR`'s) and the flaky
cluster's module (the example cluster module with examples/clusterapi/flaky's files
added) becomes an image as `captf image build` makes one: the module, this checkout's
OpenTofu and the providers of its mirror the module requires. The tag names the
content (the first 16 hex digits of the image's content key), so a changed module is a
new tag, hence an inputs change, and a layer already built for that content is taken
from the cache (`<cache>/module-layers/`) instead of being compressed again: a warm
`make run` only uploads the layers to the registry, which starts empty. The runtime's
layer is the same in every image, so it is uploaded once.

examples/clusterapi names the images at `localhost:5000/captf-examples/<name>:v1`, as a
reader who runs a registry of their own would push them; `point_at` puts the running
registry's references in their place."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

from controller.core.contract.roles import Role
from controller.image import build
from runtime.jsonobj import Json

REPOSITORY: Final = "captf-examples"
EXAMPLE_REGISTRY: Final = "localhost:5000"
FLAKY: Final = "flaky"
ROLES: Final = ("cluster", "machine", "machinepool")
_MODULE_SUFFIXES: Final = (".tf", ".tf.json")
TAG_DIGITS: Final = 16

Say = Callable[[str], None]


class ModulesInvalid(Exception):
    """A modules directory `make run` cannot build images of; one line saying why."""


def role_dirs(modules: Path) -> dict[str, Path]:
    """`modules`/<role> for every role, each with a module file at its top."""
    if not modules.is_dir():
        raise ModulesInvalid(f"{modules}: no such directory (it holds {', '.join(ROLES)})")
    found: dict[str, Path] = {}
    for role in ROLES:
        directory = modules / role
        if not directory.is_dir():
            raise ModulesInvalid(f"{directory}: no such directory")
        if not any(p.name.endswith(_MODULE_SUFFIXES) for p in directory.iterdir()):
            raise ModulesInvalid(f"{directory}: no .tf file, so no module")
        found[role] = directory
    return found


def layer_cache() -> Path:
    """Where built layers are kept, beside the binaries the hack/ scripts cache."""
    root = os.environ.get("CAPTF_CACHE_DIR") or str(Path.home() / ".cache" / "captf")
    return Path(root) / "module-layers"


def push_all(
    roles: dict[str, Path], flaky: tuple[Path, Path], host: str, tofu: Path, say: Say
) -> dict[str, str]:
    """Every image pushed to the registry at `host`: name (the roles, and `flaky`) ->
    reference by tag. `flaky`: the cluster module and the overlay making the flaky
    cluster's (the example's always: the overlay is written against it)."""
    pushed = {
        role: _push(directory, Role(role), role, host, tofu, say)
        for role, directory in roles.items()
    }
    with tempfile.TemporaryDirectory(prefix="captf-flaky-module-") as scratch:
        merged = Path(scratch)
        for path in [*_files(flaky[0]), *_files(flaky[1])]:
            shutil.copyfile(path, merged / path.name)
        pushed[FLAKY] = _push(merged, Role.CLUSTER, FLAKY, host, tofu, say)
    return pushed


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file())


def _push(module: Path, role: Role, name: str, host: str, tofu: Path, say: Say) -> str:
    planned = build.plan(module, role, runtime=tofu / "tofu", providers=tofu / "mirror")
    cached = all((layer_cache() / f"{layer.key}.tar.gz").is_file() for layer in planned.layers)
    reference = f"{host}/{REPOSITORY}/{name}:{planned.key[:TAG_DIGITS]}"
    digest = build.push(planned, reference, layers=layer_cache())
    how = "layers cached" if cached else "layers built"
    say(f"  {reference} ({how}) {digest}")
    return reference


def point_at(doc: Json, images: dict[str, str]) -> Json:
    """`doc` with an example image reference (`localhost:5000/captf-examples/NAME:...`)
    in `spec.source` or `spec.template.spec.source` replaced by `images[NAME]`."""
    spec = doc.get("spec") or {}
    for holder in (spec, (spec.get("template") or {}).get("spec") or {}):
        source = holder.get("source") or {}
        image = source.get("image")
        prefix = f"{EXAMPLE_REGISTRY}/{REPOSITORY}/"
        if isinstance(image, str) and image.startswith(prefix):
            name = image.removeprefix(prefix).split(":", 1)[0].split("@", 1)[0]
            if name in images:
                source["image"] = images[name]
    return doc
