"""A container's termination message, as a kubelet keeps it.

The container writes its message to `terminationMessagePath` (default
/dev/termination-log). Without mount namespaces the node cannot put a file there, so
each container start gets a fresh, empty file under the pod's directory, and that
path is mapped to it the way a volume's mount path is mapped to the volume's
directory (controller/dev/node/volumes.py): an env value, argument or working
directory naming the path names the file. After the process exits, the node reads
at most MESSAGE_LIMIT bytes of it into the terminated state's `message`.

`terminationMessagePolicy: FallbackToLogsOnError` is read as `File`: the node does
not fall back to the container's log."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.jsonobj import Json

DEFAULT_PATH = "/dev/termination-log"
# The kubelet's cap on one container's message.
MESSAGE_LIMIT = 4096


def message_path(container: Json) -> str:
    """Where the container writes its termination message, as the pod names it."""
    return str(container.get("terminationMessagePath") or DEFAULT_PATH)


def fresh_file(directory: Path, container: str) -> Path:
    """An empty message file for one start of `container`: a message left by an earlier
    run is never reported for a later one."""
    path = directory / container / "termination-log"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    return path


def read_message(path: Path) -> str:
    """The first MESSAGE_LIMIT bytes of the message; "" when there is none."""
    try:
        with path.open("rb") as found:
            raw = found.read(MESSAGE_LIMIT)
    except OSError:
        return ""
    return raw.decode("utf-8", "replace")
