"""A container's termination message on the process node: where it goes, what is kept."""

from __future__ import annotations

from pathlib import Path

from controller.dev.node.termination import (
    MESSAGE_LIMIT,
    fresh_file,
    message_path,
    read_message,
)
from controller.dev.node.volumes import Mounts


def test_the_path_is_the_containers_or_the_kubernetes_default() -> None:
    assert message_path({"name": "c"}) == "/dev/termination-log"
    assert message_path({"terminationMessagePath": "/var/run/msg"}) == "/var/run/msg"


def test_each_start_gets_an_empty_file_and_the_path_names_it(tmp_path: Path) -> None:
    path = fresh_file(tmp_path, "runner")
    path.write_text("from the last run")
    again = fresh_file(tmp_path, "runner")
    assert again == path
    assert read_message(again) == ""
    mounts = Mounts({"/dev/termination-log": again})
    assert mounts.rewrite("/dev/termination-log") == str(again)


def test_the_message_is_capped_as_a_kubelet_caps_it(tmp_path: Path) -> None:
    path = fresh_file(tmp_path, "runner")
    path.write_bytes(b"x" * (MESSAGE_LIMIT + 10))
    assert read_message(path) == "x" * MESSAGE_LIMIT
    assert read_message(tmp_path / "missing") == ""
