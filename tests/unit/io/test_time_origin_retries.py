"""Reading the time origin at start-up waits out the API server's momentary trouble, and
says anything else in one line."""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.io import main
from controller.io.config import ControllerConfig
from runtime.errors import ApiError
from runtime.shutdown import StopRequest
from runtime.timeorigin import ORIGIN_KEY, OriginError, scaled_clock

ORIGIN = "2026-05-04T10:00:00.000000Z"
TRANSIENT = [
    ConnectionRefusedError(111, "Connection refused"),
    ConnectionResetError(104, "Connection reset by peer"),
    TimeoutError(),
    ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request"),
    ApiError(500, "InternalError", "etcdserver: leader changed"),
    ApiError(429, "TooManyRequests", "storage is (re)initializing"),
]


class FlakyApi:
    """Fails with `failures` in turn, then answers with the recorded origin."""

    def __init__(self, failures: Sequence[BaseException]) -> None:
        self.failures = list(failures)
        self.attempts = 0

    async def request(self, method: str, path: str, *, body: object = None) -> dict[str, Any]:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"data": {ORIGIN_KEY: ORIGIN}}


@pytest.mark.looptime
async def test_transient_failures_are_waited_out() -> None:
    api = FlakyApi(TRANSIENT)
    clock = await scaled_clock(api, "captf-system", "captf-time-origin", 60.0)
    assert clock.scale == 60.0
    assert api.attempts == len(TRANSIENT) + 1  # the last GET read the recorded origin


@pytest.mark.parametrize(
    "error",
    [
        ApiError(403, "Forbidden", 'configmaps "captf-time-origin" is forbidden'),
        ApiError(401, "Unauthorized", "Unauthorized"),
    ],
    ids=["forbidden", "unauthorized"],
)
@pytest.mark.looptime
async def test_any_other_failure_is_an_origin_error_at_once(error: Exception) -> None:
    api = FlakyApi([error])
    with pytest.raises(OriginError, match="ConfigMap captf-system/captf-time-origin: "):
        await scaled_clock(api, "captf-system", "captf-time-origin", 60.0)
    assert api.attempts == 1


def test_captf_run_says_an_origin_error_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refused(_: object) -> None:
        raise OriginError("ConfigMap captf-system/captf-time-origin: 403 Forbidden")

    monkeypatch.setattr(main, "_until_signalled", refused)
    from controller.cli.main import parser

    args: argparse.Namespace = parser().parse_args(["run", "--time-scale", "60"])
    assert main.run(args) == 2
    err = capsys.readouterr().err
    assert (
        err == "captf run: --time-scale: ConfigMap captf-system/captf-time-origin: 403 Forbidden\n"
    )


async def test_a_stop_during_the_origin_read_ends_serve(tmp_path: Path) -> None:
    """SIGTERM while the API server cannot be reached yet (a pod starting as the cluster
    stops): `serve` returns instead of retrying the read until a SIGKILL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: connections are refused
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    config = ControllerConfig(
        kubeconfig=str(kubeconfig), controller_namespace="captf-system", time_scale=60.0
    )
    stop = StopRequest()
    asyncio.get_running_loop().call_later(0.5, stop.set)
    async with asyncio.timeout(20):  # a hang guard: the retries back off up to 30 s each
        await main.serve(config, stop=stop)
