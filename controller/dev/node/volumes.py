"""A pod's files on this machine: one directory per pod, one subdirectory per volume.

There are no mount namespaces: a container sees the host's filesystem. So a
volume is a directory under the pod's root, and a container finds it because
the node rewrites paths: any `command`, `args`, `workingDir` or env value that
is a mount's `mountPath` or lies under it is rewritten to the volume's
directory (`/tmp/work` with `tmp` mounted at `/tmp` becomes
`<pod root>/v/tmp/work`). A volume mounted at `/tmp` also becomes the
container's TMPDIR. Paths a program builds at run time from a fixed prefix are
not rewritten: that is the limit of running without isolation.

Volume kinds: `emptyDir` (an empty directory, removed with the pod), `image` (the
pulled image's root in the node's image cache, shared and read-only, see `pull`), `secret`
and `configMap` (their keys as files, 0600), and `projected` with
`serviceAccountToken` (minted through the TokenRequest API, bound to the pod),
`configMap`, `secret` and `downwardAPI` sources: exactly what the ServiceAccount
admission plugin adds as `kube-api-access-*`. The mount of that volume at the
standard in-cluster directory is announced to the process as
`CAPTF_SERVICE_ACCOUNT_DIR`, which the project's in-cluster loader reads."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from controller.dev.node.env import Missing, ObjectReader, Unsupported, field_value
from runtime.incluster import DEFAULT_SERVICE_ACCOUNT_DIR, SERVICE_ACCOUNT_DIR_ENV
from runtime.jsonobj import Json


class TokenMinter(Protocol):
    async def mint_token(self, pod: Json, audience: str | None, expiration_seconds: int) -> str:
        """A token for the pod's ServiceAccount, bound to the pod (TokenRequest)."""
        ...


class VolumeSource(ObjectReader, TokenMinter, Protocol):
    """What filling a pod's volumes reads from the API server."""


@dataclass(frozen=True)
class Mounts:
    """A container's view of its volumes: container path -> directory on this machine."""

    paths: Mapping[str, Path]
    # The root filesystem of a container that runs from a pulled image: an absolute path
    # under no mount lies in it. None: the host's (the image table's programs).
    root: Path | None = None

    def rewrite(self, text: str) -> str:
        """`text` with a leading mount path replaced by its directory; the longest wins."""
        for mount in sorted(self.paths, key=len, reverse=True):
            if text == mount:
                return str(self.paths[mount])
            if text.startswith(mount.rstrip("/") + "/"):
                return str(self.paths[mount]) + text[len(mount.rstrip("/")) :]
        if self.root is not None and text.startswith("/"):
            return str(self.root) + text
        return text

    def env(self) -> dict[str, str]:
        """What the node adds to the environment because of where volumes are mounted."""
        added: dict[str, str] = {}
        if "/tmp" in self.paths:
            added["TMPDIR"] = str(self.paths["/tmp"])
        sa = self.paths.get(str(DEFAULT_SERVICE_ACCOUNT_DIR))
        if sa is not None:
            added[SERVICE_ACCOUNT_DIR_ENV] = str(sa)
        return added


def pod_root(base: Path, pod: Json) -> Path:
    """`<base>/<uid>`: short on purpose. Programs put Unix sockets under TMPDIR (OpenTofu's
    provider plugins do), and a socket's path may not exceed 107 bytes."""
    return base / str(pod["metadata"]["uid"])


async def fill_volumes(pod: Json, root: Path, source: VolumeSource) -> dict[str, Path]:
    """Create every volume of `pod` under `root/v`; name -> directory. Secrets and
    ConfigMaps are read again and tokens minted again on every call (a container start)."""
    directories: dict[str, Path] = {}
    for volume in pod.get("spec", {}).get("volumes") or []:
        name = str(volume["name"])
        if "image" in volume:
            continue  # pulled when a container that mounts it starts (image_volumes)
        directory = root / "v" / name
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        await _fill(volume, pod, directory, source)
        directories[name] = directory
    return directories


def image_volumes(pod: Json, container: Json) -> dict[str, Json]:
    """The image volumes `container` mounts: volume name -> its `image` source."""
    sources = {
        str(v["name"]): dict(v["image"])
        for v in pod.get("spec", {}).get("volumes") or []
        if "image" in v
    }
    mounted = {str(m["name"]) for m in container.get("volumeMounts") or []}
    return {name: source for name, source in sources.items() if name in mounted}


def container_mounts(container: Json, volumes: Mapping[str, Path]) -> Mounts:
    paths: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        name = str(mount["name"])
        if name not in volumes:
            raise Unsupported(f"volumeMount {name}: no such volume in the pod")
        directory = volumes[name]
        sub = str(mount.get("subPath") or "")
        if sub:
            directory = directory / _relative(sub)
            directory.mkdir(parents=True, exist_ok=True)
        paths[str(PurePosixPath(str(mount["mountPath"])))] = directory
    return Mounts(paths)


async def _fill(volume: Json, pod: Json, directory: Path, source: VolumeSource) -> None:
    namespace = str(pod["metadata"]["namespace"])
    if "emptyDir" in volume:
        return
    if "secret" in volume:
        spec = volume["secret"]
        ref = {"name": spec["secretName"], "optional": spec.get("optional", False)}
        await _keys(directory, source, "secrets", namespace, ref, spec.get("items"))
        return
    if "configMap" in volume:
        spec = volume["configMap"]
        await _keys(directory, source, "configmaps", namespace, spec, spec.get("items"))
        return
    if "projected" in volume:
        for item in volume["projected"].get("sources") or []:
            await _projected(item, pod, directory, source)
        return
    kinds = sorted(k for k in volume if k != "name")
    raise Unsupported(f"volume {volume['name']}: {kinds} (emptyDir, secret, configMap, projected)")


async def _projected(item: Json, pod: Json, directory: Path, source: VolumeSource) -> None:
    namespace = str(pod["metadata"]["namespace"])
    if "serviceAccountToken" in item:
        spec = item["serviceAccountToken"]
        expiration = int(spec.get("expirationSeconds", 3600))
        token = await source.mint_token(pod, spec.get("audience"), expiration)
        _write(directory / _relative(str(spec["path"])), token)
    elif "configMap" in item:
        spec = item["configMap"]
        await _keys(directory, source, "configmaps", namespace, spec, spec.get("items"))
    elif "secret" in item:
        spec = item["secret"]
        await _keys(directory, source, "secrets", namespace, spec, spec.get("items"))
    elif "downwardAPI" in item:
        for entry in item["downwardAPI"].get("items") or []:
            if "fieldRef" not in entry:
                raise Unsupported(f"downwardAPI item {entry.get('path')}: only fieldRef")
            value = field_value(pod, str(entry["fieldRef"]["fieldPath"]))
            _write(directory / _relative(str(entry["path"])), value)
    else:
        raise Unsupported(f"projected source {sorted(item)}")


async def _keys(
    directory: Path,
    source: ObjectReader,
    kind: str,
    namespace: str,
    ref: Json,
    items: list[Json] | None,
) -> None:
    obj = await source.read(kind, namespace, str(ref["name"]))
    if obj is None:
        if ref.get("optional"):
            return
        raise Missing(f"{kind[:-1]} {namespace}/{ref['name']} not found")
    data: dict[str, bytes] = {}
    for key, value in (obj.get("data") or {}).items():
        data[key] = base64.b64decode(value) if kind == "secrets" else str(value).encode()
    for key, value in (obj.get("binaryData") or {}).items():
        data[key] = base64.b64decode(value)
    wanted = [(str(i["key"]), str(i["path"])) for i in items] if items else [(k, k) for k in data]
    for key, path in wanted:
        if key not in data:
            if ref.get("optional"):
                continue
            raise Missing(f"{kind[:-1]} {namespace}/{ref['name']} has no key {key!r}")
        _write(directory / _relative(path), data[key])


def _relative(path: str) -> Path:
    """A path inside a volume; `..` and absolute paths are refused, as the API server does."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts:
        raise Unsupported(f"volume path {path!r} leaves its volume")
    return Path(*pure.parts)


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    # Written whole and renamed, private to this user: a token or key is never half there.
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(raw)
    tmp.replace(path)
