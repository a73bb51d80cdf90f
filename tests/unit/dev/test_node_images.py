"""The node's image table: which local program an image stands for."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.dev.node.images import (
    LOCAL_CAPTF,
    Image,
    ImageTable,
    UnknownImage,
    default_images,
    released,
    repository_of,
)

TABLE = default_images({"CAPTF_TOFU": "/opt/tofu"})


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("captf", "captf"),
        ("captf:dev", "captf"),
        ("ghcr.io/acme/captf:v1.2", "ghcr.io/acme/captf"),
        ("registry:5000/captf", "registry:5000/captf"),
        ("registry:5000/team/captf:dev@sha256:abc", "registry:5000/team/captf"),
        ("captf@sha256:abc", "captf"),
    ],
)
def test_the_repository_drops_tag_and_digest_but_not_a_registry_port(
    image: str, repository: str
) -> None:
    assert repository_of(image) == repository


@pytest.mark.parametrize(
    "image", ["captf:dev", "captf", "ghcr.io/acme/captf:v1", "captf@sha256:0123"]
)
def test_every_captf_image_is_this_checkouts_captf(image: str) -> None:
    assert TABLE.resolve(image).argv == LOCAL_CAPTF
    assert TABLE.resolve(image).env == {"CAPTF_TOFU": "/opt/tofu"}


@pytest.mark.parametrize("image", ["busybox", "captf-other:dev", "acme/notcaptf"])
def test_an_image_not_in_the_table_is_refused_with_its_name(image: str) -> None:
    with pytest.raises(UnknownImage, match=image):
        TABLE.resolve(image)


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        ([], ["runner"], [*LOCAL_CAPTF, "runner"]),
        (["captf"], ["run", "--leader-elect"], [*LOCAL_CAPTF, "run", "--leader-elect"]),
        (["captf", "run"], ["-v"], [*LOCAL_CAPTF, "run", "-v"]),
        (["/bin/sh", "-c"], ["echo hi"], ["/bin/sh", "-c", "echo hi"]),
        ([], [], list(LOCAL_CAPTF)),
    ],
)
def test_command_and_args_as_kubernetes_with_the_entrypoint_local(
    command: list[str], args: list[str], expected: list[str]
) -> None:
    assert TABLE.command_line("captf:dev", command, args) == expected


def test_a_table_of_its_own_maps_other_images() -> None:
    table = ImageTable({"python": Image("python", ("/usr/bin/python3",))})
    assert table.command_line("python:3.12", [], ["-c", "pass"]) == [
        "/usr/bin/python3",
        "-c",
        "pass",
    ]
    with pytest.raises(UnknownImage):
        table.resolve("captf:dev")


def test_a_tagged_entry_runs_that_release_and_only_for_its_tag(tmp_path: Path) -> None:
    env = {"CAPTF_TOFU": "/opt/tofu"}
    table = ImageTable({**TABLE.entries, "captf:v0.1.0": released(tmp_path, env)})
    for image in (
        "captf:v0.1.0",
        "docker.io/library/captf:v0.1.0",
        "r:5000/x/captf:v0.1.0@sha256:0",
    ):
        old = table.resolve(image)
        assert old.env == {**env, "PYTHONPATH": str(tmp_path)}
        assert old.argv == LOCAL_CAPTF
    for image in ("captf:v0.2.0", "ghcr.io/captf-io/captf:v0.2.0", "captf:dev", "captf"):
        assert "PYTHONPATH" not in table.resolve(image).env
