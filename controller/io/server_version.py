"""The API server's version, read once when the controller starts to lead: it decides
`--module-image-mount=auto` (controller/core/spec/module_mount.py)."""

from __future__ import annotations

import logging
from typing import Protocol

import aiohttp

from controller.core import version_of
from runtime.errors import ApiError

log = logging.getLogger("captf")


class Requests(Protocol):
    async def request(self, method: str, path: str) -> dict[str, object]: ...


async def server_version(api: Requests) -> tuple[int, int] | None:
    """(major, minor), or None when /version does not answer or cannot be read (logged:
    `auto` then takes the copy shape, which works on every version)."""
    try:
        info = await api.request("GET", "/version")
    except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
        log.warning("the API server's /version did not answer (%s); module images: copy", err)
        return None
    found = version_of(dict(info))
    if found is None:
        log.warning("the API server's /version has no readable major and minor")
    return found
