"""Whether the API server keeps image volumes, asked once when the controller starts to
lead: the answer decides `--module-image-mount=auto` (controller/core/spec/module_mount.py).

An API server drops from what it stores the fields of a feature that is turned off
(`--feature-gates=ImageVolume=false`), whatever its version says, and a server-side dry
run answers with what it would store while storing nothing. So the controller dry-runs
the create of a Job, the object it creates and may create wherever it runs Jobs, whose
pod has an image volume, and reads whether the answer still holds it. A dry run that is
refused (RBAC, a quota, an admission policy, an unreachable server) tells nothing: the
version decides then, and the log says why."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp

from controller.core import MOUNT_AUTO, Settings
from controller.io.config import ControllerConfig
from controller.io.server_version import server_version
from runtime.errors import ApiError
from runtime.jsonobj import Json

log = logging.getLogger("captf")

# Never stored: the server names a dry-run object and forgets it.
PROBE_PREFIX = "captf-image-volume-probe-"
PROBE_VOLUME = "module-image"


class Requests(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
    ) -> dict[str, Any]: ...


def probe_job() -> Json:
    """A Job whose pod has an image volume and nothing else of note. No container mounts
    it: a server without image volumes drops the volume, and a mount of it would then make
    the dry run invalid instead of answered."""
    container = {"name": "probe", "image": "captf-probe", "args": ["runner"]}
    volume = {"name": PROBE_VOLUME, "image": {"reference": "captf-probe"}}
    pod = {"restartPolicy": "Never", "containers": [container], "volumes": [volume]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": PROBE_PREFIX},
        "spec": {"template": {"spec": pod}},
    }


def kept(stored: Json) -> bool:
    """Whether the dry run's answer still has the image volume."""
    pod = ((stored.get("spec") or {}).get("template") or {}).get("spec") or {}
    return any(isinstance(v, dict) and "image" in v for v in pod.get("volumes") or ())


async def image_volumes_kept(api: Requests, namespace: str) -> bool | None:
    """True when the API server keeps an image volume, False when it drops it, None when
    it refused the dry run or did not answer (logged, with what it said)."""
    path = f"/apis/batch/v1/namespaces/{quote(namespace, safe='')}/jobs"
    try:
        stored = await api.request("POST", path, params={"dryRun": "All"}, body=probe_job())
    except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
        log.warning(
            "module images: a dry-run Job in namespace %s was refused (%s), so whether the "
            "API server keeps image volumes is unknown; the version decides",
            namespace,
            err,
        )
        return None
    return kept(stored)


async def leading_settings(args: ControllerConfig, api: Requests, namespace: str) -> Settings:
    """The settings of a controller that starts to lead, --module-image-mount=auto resolved
    (logged); `namespace`: the controller's own, holding its run slots."""
    version = await server_version(api)
    found = None
    if args.module_image_mount == MOUNT_AUTO:
        # Where the controller may create Jobs: a watched namespace, else its own.
        found = await image_volumes_kept(api, (args.watched() or (namespace,))[0])
    settings = args.settings(slot_namespace=namespace, server_version=version, image_volumes=found)
    shown = "unknown" if version is None else f"v{version[0]}.{version[1]}"
    said = {None: "", True: ", keeps image volumes", False: ", drops image volumes"}[found]
    log.info(
        "module images: the %s shape (API server %s%s, --module-image-mount=%s)",
        settings.module_image_mount,
        shown,
        said,
        args.module_image_mount,
    )
    return settings
