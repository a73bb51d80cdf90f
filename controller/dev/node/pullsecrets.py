"""A pod's `imagePullSecrets` as the registry credentials of its pulls.

Each named Secret of type `kubernetes.io/dockerconfigjson` (key `.dockerconfigjson`,
`{"auths": {registry: {...}}}`) or the older `kubernetes.io/dockercfg` (key
`.dockercfg`, the `auths` map alone) is read through the node's API access at every
pull attempt, so a Secret created after the pod is used on the next try. Their
`auths` are merged into one Docker config file, the first Secret naming a registry
winning, and crane reads it through `DOCKER_CONFIG`. As a kubelet does, a Secret
that is missing or of another type is passed over (the pull then goes without it
and fails if the registry wants credentials); the reason is returned for the log.

The file lies in the pod's own directory, readable by this user only, and goes
with the pod."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from controller.dev.node.env import ObjectReader
from controller.io.registry import auths_of as auths_of  # one reader, the controller's too
from runtime.jsonobj import Json


@dataclass(frozen=True)
class Credentials:
    """Where the merged config was written (None: no usable Secret), and what was skipped."""

    docker_config: Path | None
    skipped: list[str] = field(default_factory=list)


async def pull_credentials(pod: Json, reader: ObjectReader, directory: Path) -> Credentials:
    """Merge the pod's pull Secrets into `directory/config.json`."""
    namespace = str(pod["metadata"]["namespace"])
    auths: Json = {}
    skipped: list[str] = []
    for ref in pod.get("spec", {}).get("imagePullSecrets") or []:
        name = str(ref.get("name") or "")
        secret = await reader.read("secrets", namespace, name) if name else None
        if secret is None:
            skipped.append(f"imagePullSecret {namespace}/{name} not found")
            continue
        try:
            found = auths_of(secret)
        except ValueError as exc:
            skipped.append(f"imagePullSecret {namespace}/{name}: {exc}")
            continue
        for registry, entry in found.items():
            auths.setdefault(registry, entry)
    if not auths:
        return Credentials(None, skipped)
    _write_private(directory / "config.json", json.dumps({"auths": auths}))
    return Credentials(directory, skipped)


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    tmp.replace(path)
