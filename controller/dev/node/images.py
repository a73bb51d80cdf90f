"""Which local program an image stands for: the node's image table.

The node pulls no container image and isolates nothing: a container's image is a
name for a program already on this machine. (Image *volumes* are pulled, as files
to mount: `imagevolumes`, `pull`.) An entry maps an image *repository* (the reference
without tag or digest, so `captf:dev`, `captf:v1` and `registry.example/captf@sha256:...`
all match `captf`, as does any `.../captf`) to the image's ENTRYPOINT as a local
argv. A container with `command` runs that command instead, except that a
`command[0]` naming the entrypoint's program (`captf`) runs the local one; `args`
follow as Kubernetes says.

An entry may also name one tag of a repository (`captf:v0.1.0`): it wins over the
repository's for that tag only, so one table runs two releases side by side, a
release's image (`released`) being that release's source tree, under the same
interpreter, on its PYTHONPATH (tests/e2e/test_upgrade_e2e.py runs v0.1.0 so).

The default table has one entry: the runner image and the controller image are
both this project's `captf`, run as this checkout's CLI under the node's own
interpreter (so a virtualenv needs no PATH). An image not in the table does not
start: the container waits with `ErrImagePull`, as a kubelet does for an image it
cannot get."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# This checkout's `captf` under the running interpreter.
LOCAL_CAPTF: tuple[str, ...] = (sys.executable, "-m", "controller.cli.entry")


class UnknownImage(Exception):
    """The image is not in the node's table: nothing to run it with."""


@dataclass(frozen=True)
class Image:
    """One entry: `program` is the image's command name, `argv` the local command for it,
    `env` the image's ENV (below the container's own variables)."""

    program: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ImageTable:
    """Image repository -> what runs locally; see the module's docstring."""

    entries: Mapping[str, Image] = field(default_factory=dict)

    def resolve(self, image: str) -> Image:
        repository = repository_of(image)
        name = repository.rsplit("/", 1)[-1]
        tag = tag_of(image)
        found = (
            (self.entries.get(f"{name}:{tag}") if tag else None)
            or self.entries.get(repository)
            or self.entries.get(name)
        )
        if found is None:
            known = ", ".join(sorted(self.entries)) or "none"
            raise UnknownImage(f"image {image!r} is not in the node's image table ({known})")
        return found

    def command_line(self, image: str, command: Sequence[str], args: Sequence[str]) -> list[str]:
        """The local argv for a container: `command` (else the entrypoint) plus `args`."""
        entry = self.resolve(image)
        if not command:
            return [*entry.argv, *args]
        if command[0] == entry.program:
            return [*entry.argv, *command[1:], *args]
        return [*command, *args]


def repository_of(image: str) -> str:
    """`registry:5000/team/captf:dev@sha256:...` -> `registry:5000/team/captf`."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        last[-1] = last[-1].split(":", 1)[0]
    return "/".join(last)


def tag_of(image: str) -> str:
    """`registry:5000/team/captf:dev@sha256:...` -> `dev`; "" without a tag."""
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def released(tree: Path, captf_env: Mapping[str, str]) -> Image:
    """The `captf` of the source tree `tree` (another release's, unpacked): its own code
    first on the path, this interpreter and its installed dependencies."""
    return Image("captf", LOCAL_CAPTF, {**captf_env, "PYTHONPATH": str(tree)})


def default_images(captf_env: Mapping[str, str]) -> ImageTable:
    """The table `captf dev node` uses; `captf_env` is the image's ENV (the OpenTofu build)."""
    return ImageTable({"captf": Image("captf", LOCAL_CAPTF, dict(captf_env))})
