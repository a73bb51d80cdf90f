"""How a runner pod gets its module image (spec.source.image): two shapes of one Job.

`volume`: a Kubernetes image volume (`volumes[].image`, on by default from v1.35) holds
the image's filesystem, mounted read-only at /module-image.

`copy`, for any version: two init containers and two emptyDirs. The first, from the
runner image, puts the runner image's static copier into the `copier` emptyDir (`captf
install-copier`); the second, from the module image by digest with the source's pull
policy, runs that copier to copy the image's /captf into the `module-image` emptyDir,
mounted read-only at /module-image in the runner. The module image holds no shell and
no copier, which is why our image provides one. Everything the runner sees is the same
in both: CAPTF_MODULE_IMAGE_DIR is /module-image/captf.

Both pull the module image by the same digest, with the same pull policy and the pod's
pull Secrets, and a pull failure shows on the pod as a kubelet reports it (an image
volume's on the runner container, the copy's on its init container), where
controller/core/jobs/starting.py looks. The controller chooses the shape once, from its
`--module-image-mount` flag and what the API server says of image volumes: whether a
dry-run Job keeps one, else its version (`mount_of`). Pure."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Final

from controller.core.spec.refs import ModuleImage
from runtime.jsonobj import Json

VOLUME: Final = "volume"
COPY: Final = "copy"
AUTO: Final = "auto"
MOUNTS: Final = (AUTO, VOLUME, COPY)
# Image volumes are beta and on by default from this version (earlier: alpha, off).
IMAGE_VOLUMES_BY_DEFAULT: Final = (1, 35)

MODULE_IMAGE_VOLUME: Final = "module-image"
MODULE_IMAGE_MOUNT: Final = "/module-image"
MODULE_IMAGE_DIR: Final = f"{MODULE_IMAGE_MOUNT}/captf"
COPIER_VOLUME: Final = "copier"
COPIER_MOUNT: Final = "/copier"
COPIER: Final = f"{COPIER_MOUNT}/captf-copy"
# The image contract's directory in a module image.
IMAGE_ROOT: Final = "/captf"
# A module image is built to run as this user (captf image build sets it); the copy runs
# as it unless the policy names another, so a restricted pod never runs it as root.
IMAGE_USER: Final = 65532
_MINOR = re.compile(r"^([0-9]+)")


def version_of(info: Json) -> tuple[int, int] | None:
    """(major, minor) of the API server's /version answer; managed offerings write the
    minor as `34+`. None when it cannot be read."""
    major, minor = (
        _MINOR.match(str(info.get("major") or "")),
        _MINOR.match(str(info.get("minor") or "")),
    )
    if major is None or minor is None:
        return None
    return int(major[1]), int(minor[1])


def mount_of(flag: str, version: tuple[int, int] | None, kept: bool | None = None) -> str:
    """The shape the Jobs use: the flag's, or for `auto` the API server's answer. `kept`:
    whether it kept the image volume of a dry-run Job (None: not asked, or it refused);
    an API server drops the fields of a feature turned off, whatever its version. Without
    that answer, the version: `volume` from v1.35 on, `copy` before it and when the version
    is unknown (`copy` works everywhere)."""
    if flag in (VOLUME, COPY):
        return flag
    if kept is not None:
        return VOLUME if kept else COPY
    return VOLUME if version is not None and version >= IMAGE_VOLUMES_BY_DEFAULT else COPY


@dataclass(frozen=True)
class ModuleMount:
    """What a shape adds to the runner's pod."""

    volumes: tuple[Json, ...]
    init_containers: tuple[Json, ...]
    runner_mount: Json


def module_mount(
    image: ModuleImage, shape: str, *, runner_image: str, container: Json, pod_context: Json
) -> ModuleMount:
    """The volumes, init containers and runner mount of `shape`; `container` holds what
    every container of the pod gets (resources, securityContext), `pod_context` the pod's
    security context."""
    mount = {"name": MODULE_IMAGE_VOLUME, "mountPath": MODULE_IMAGE_MOUNT, "readOnly": True}
    if shape != COPY:
        source = {"reference": image.volume_reference, "pullPolicy": image.pull_policy}
        return ModuleMount(({"name": MODULE_IMAGE_VOLUME, "image": source},), (), mount)
    volumes = (
        {"name": COPIER_VOLUME, "emptyDir": {}},
        {"name": MODULE_IMAGE_VOLUME, "emptyDir": {}},
    )
    copier = {"name": COPIER_VOLUME, "mountPath": COPIER_MOUNT}
    install = copy.deepcopy(container) | {
        "name": "install-copier",
        "image": runner_image,
        "args": ["install-copier", COPIER],
        "volumeMounts": [copier],
    }
    context = dict(container["securityContext"])
    if "runAsUser" not in context and "runAsUser" not in pod_context:
        context |= {"runAsUser": IMAGE_USER, "runAsGroup": IMAGE_USER}
    copier_run = copy.deepcopy(container) | {
        "name": "copy-module",
        "image": image.volume_reference,
        "imagePullPolicy": image.pull_policy,
        "command": [COPIER, IMAGE_ROOT, MODULE_IMAGE_DIR],
        "volumeMounts": [copier | {"readOnly": True}, mount | {"readOnly": False}],
        "securityContext": context,
    }
    return ModuleMount(volumes, (install, copier_run), mount)
