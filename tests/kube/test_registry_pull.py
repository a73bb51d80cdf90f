"""The node's image cache against the real registry: pulled by reference through crane,
digests verified, cached by digest, and the pull policy deciding who asks the registry."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from controller.dev.node.pull import Puller, PullFailed
from runtime.envtest.registry import Registry
from tests.registry_support import layer, push, requests

pytestmark = pytest.mark.kube


@pytest.fixture
def repo() -> str:
    """A repository of this test's own."""
    return f"pull/{uuid.uuid4().hex[:10]}"


def images(cache: Path) -> list[str]:
    return (
        sorted(p.name for p in (cache / "images").iterdir()) if (cache / "images").exists() else []
    )


async def test_if_not_present_pulls_once_and_always_asks_for_the_digest_only(
    registry: Registry, repo: str, tmp_path: Path
) -> None:
    files = {"main.tf": b"# module\n", "sub/vars.tf": b"variable x {}\n"}
    digest = push(registry, f"{repo}:v1", [layer(tmp_path / "l.tar.gz", files)])
    puller = Puller(tmp_path / "cache", registry.crane)
    image = f"{registry.host}/{repo}:v1"

    first = await puller.pull(image, "IfNotPresent")
    assert first.digest == digest
    assert first.pulled
    assert (first.rootfs / "main.tf").read_bytes() == b"# module\n"
    assert (first.rootfs / "sub/vars.tf").read_bytes() == b"variable x {}\n"
    assert not (first.rootfs / "main.tf").stat().st_mode & 0o222
    assert images(tmp_path / "cache") == [digest.replace(":", "-")]
    manifests = requests(registry, f"/v2/{repo}/manifests/")
    blobs = requests(registry, f"/v2/{repo}/blobs/")

    again = await puller.pull(image, "IfNotPresent")
    assert again == first.__class__(digest, first.rootfs, pulled=False)
    assert requests(registry, f"/v2/{repo}/manifests/") == manifests

    always = await puller.pull(image, "Always")
    assert always.pulled
    assert always.rootfs == first.rootfs
    assert requests(registry, f"/v2/{repo}/manifests/") > manifests
    assert requests(registry, f"/v2/{repo}/blobs/") == blobs  # same digest: nothing fetched


async def test_a_moved_tag_is_followed_by_always_and_not_by_if_not_present(
    registry: Registry, repo: str, tmp_path: Path
) -> None:
    old = push(registry, f"{repo}:v1", [layer(tmp_path / "a.tar.gz", {"v": b"1"})])
    puller = Puller(tmp_path / "cache", registry.crane)
    image = f"{registry.host}/{repo}:v1"
    await puller.pull(image, "IfNotPresent")
    new = push(registry, f"{repo}:v1", [layer(tmp_path / "b.tar.gz", {"v": b"2"})])

    kept = await puller.pull(image, "IfNotPresent")
    assert (kept.digest, (kept.rootfs / "v").read_bytes()) == (old, b"1")
    moved = await puller.pull(image, "Always")
    assert (moved.digest, (moved.rootfs / "v").read_bytes()) == (new, b"2")
    by_digest = await puller.pull(f"{registry.host}/{repo}@{old}", "Always")
    assert (by_digest.rootfs / "v").read_bytes() == b"1"
    assert not by_digest.pulled  # a cached digest needs no registry, even under Always


async def test_layers_stack_with_whiteouts(registry: Registry, repo: str, tmp_path: Path) -> None:
    base = layer(tmp_path / "1.tar.gz", {"a": b"A", "b": b"B"})
    top = layer(tmp_path / "2.tar.gz", {".wh.a": b"", "c": b"C"})
    push(registry, f"{repo}:v1", [base, top])
    pulled = await Puller(tmp_path / "cache", registry.crane).pull(
        f"{registry.host}/{repo}:v1", "IfNotPresent"
    )
    assert sorted(p.name for p in pulled.rootfs.iterdir()) == ["b", "c"]


async def test_a_missing_image_and_never_without_a_cached_one_fail_as_a_kubelet_says(
    registry: Registry, repo: str, tmp_path: Path
) -> None:
    puller = Puller(tmp_path / "cache", registry.crane)
    with pytest.raises(PullFailed, match=r"MANIFEST_UNKNOWN|NAME_UNKNOWN") as missing:
        await puller.pull(f"{registry.host}/{repo}:nope", "IfNotPresent")
    assert missing.value.reason == "ErrImagePull"
    with pytest.raises(PullFailed, match="not present with pull policy of Never") as never:
        await puller.pull(f"{registry.host}/{repo}:nope", "Never")
    assert never.value.reason == "ErrImageNeverPull"


async def test_a_blob_whose_content_does_not_match_its_digest_is_refused(
    registry: Registry, repo: str, tmp_path: Path
) -> None:
    path = layer(tmp_path / "l.tar.gz", {"main.tf": b"# module\n"})
    push(registry, f"{repo}:v1", [path])
    # The registry stores each blob under its digest: swap the layer's bytes for others.
    data = _blob(registry, "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest())
    data.write_bytes(b"x" * data.stat().st_size)

    puller = Puller(tmp_path / "cache", registry.crane)
    with pytest.raises(PullFailed, match=r"digest|checksum") as failed:
        await puller.pull(f"{registry.host}/{repo}:v1", "IfNotPresent")
    assert failed.value.reason == "ErrImagePull"
    assert images(tmp_path / "cache") == []  # nothing half-pulled stays


async def test_a_layer_that_would_write_outside_its_root_is_refused(
    registry: Registry, repo: str, tmp_path: Path
) -> None:
    push(registry, f"{repo}:v1", [layer(tmp_path / "l.tar.gz", {"../../escaped": b"x"})])
    puller = Puller(tmp_path / "cache", registry.crane)
    with pytest.raises(PullFailed, match=r"layer refused: .* leaves the image's root"):
        await puller.pull(f"{registry.host}/{repo}:v1", "IfNotPresent")
    assert images(tmp_path / "cache") == []
    assert not _found(tmp_path, "escaped")


def _found(root: Path, name: str) -> list[Path]:
    return list(root.rglob(name))


def _blob(registry: Registry, digest: str) -> Path:
    hexa = digest.removeprefix("sha256:")
    return registry.storage / "docker/registry/v2/blobs/sha256" / hexa[:2] / hexa / "data"
