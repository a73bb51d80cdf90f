"""The live commands' transport: transient answers waited out within --request-timeout,
each wait said on stderr, on a scripted transport in virtual time; and every command that
reads the live cluster goes through it."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

import runtime.transport
from controller.cli.live_transport import LiveTransport, request_timeout, wait_after
from controller.cli.main import main, parser
from runtime.errors import ApiError

REASONS = {403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid"}
REASONS |= {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}


def _error(status: int, message: str, retry_after: str | None = None) -> ApiError:
    """The Status an API server answers, as the transport raises it."""
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    status_body = {"kind": "Status", "code": status, "reason": REASONS[status]}
    body = orjson.dumps(status_body | {"message": message})
    return ApiError.from_response(status, body, headers)


INITIALIZING = _error(429, "storage is (re)initializing", retry_after="1")
CONFLICT = _error(409, "the object has been modified")
NOT_FOUND = _error(404, "not found")


class Script:
    """Answers each request with the next of `answers` (the last one repeats); what it
    was asked is kept, with each attempt's own deadline."""

    def __init__(self, *answers: dict[str, Any] | BaseException) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str, float]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 -- the transport's signature
        accept: str = "application/json",
    ) -> dict[str, Any]:
        self.asked.append((method, path, timeout))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


class Virtual:
    """A clock that only sleeping moves, and what was said."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        self.said: list[str] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def transport(self, script: Script, limit: float = 60.0) -> LiveTransport:
        return LiveTransport(
            script, limit=limit, clock=lambda: self.now, sleep=self.sleep, say=self.said.append
        )


async def test_a_fresh_api_server_s_429_is_waited_out_as_it_asks() -> None:
    time, script = Virtual(), Script(INITIALIZING, INITIALIZING, {"items": []})
    answer = await time.transport(script).request("GET", "/api/v1/secrets")
    assert answer == {"items": []}
    assert len(script.asked) == 3
    assert time.slept == [1.0, 1.0]  # the server's Retry-After
    assert (
        time.said
        == [
            "captf: GET /api/v1/secrets: 429 TooManyRequests: storage is (re)initializing; "
            "waiting 1s (--request-timeout=60s)"
        ]
        * 2
    )


@pytest.mark.parametrize(
    "failure",
    [NOT_FOUND, CONFLICT, _error(403, "forbidden"), _error(422, "invalid"), ValueError("bug")],
)
async def test_an_answer_about_the_request_itself_is_not_sent_again(
    failure: BaseException,
) -> None:
    time, script = Virtual(), Script(failure, {})
    with pytest.raises(type(failure)):
        await time.transport(script).request("PATCH", "/x")
    assert len(script.asked) == 1
    assert (time.slept, time.said) == ([], [])


@pytest.mark.parametrize(
    "failure",
    [
        _error(503, "unavailable"),
        _error(500, "etcdserver: leader changed"),
        _error(429, "too many requests"),  # no Retry-After: the backoff
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError(),
    ],
)
async def test_a_server_that_stays_down_is_given_up_on_within_the_request_timeout(
    failure: BaseException,
) -> None:
    time, script = Virtual(), Script(failure)
    with pytest.raises(type(failure)):
        await time.transport(script, limit=20.0).request("GET", "/x")
    # 0.5, 1, 2, 4 and 8 s make 15.5 s; 8 s more would pass 20 s.
    assert time.slept == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert len(script.asked) == 6
    assert "waiting 0.5s" in time.said[0]
    assert time.said[-1].endswith("giving up after 16s (--request-timeout=20s)")
    # Each attempt's own deadline is cut to the time left.
    assert [deadline for _, _, deadline in script.asked] == [20.0, 19.5, 18.5, 16.5, 12.5, 4.5]


async def test_a_retry_after_longer_than_the_time_left_is_not_waited() -> None:
    time, script = Virtual(), Script(_error(429, "slow down", retry_after="30"))
    with pytest.raises(ApiError):
        await time.transport(script, limit=10.0).request("GET", "/x")
    assert time.slept == []
    assert time.said == [
        "captf: GET /x: 429 TooManyRequests: slow down; giving up after 0s (--request-timeout=10s)"
    ]


@pytest.mark.parametrize(
    ("retry_after", "attempt", "wait"),
    [("2", 0, 2.0), ("0", 0, 0.5), (None, 0, 0.5), (None, 3, 4.0), (None, 9, 8.0)],
)
def test_the_wait_is_the_server_s_else_the_backoff(
    retry_after: str | None, attempt: int, wait: float
) -> None:
    assert wait_after(_error(429, "x", retry_after), attempt) == wait


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30.0), ("2m", 120.0), ("1m30s", 90.0), ("45", 45.0)]
)
def test_the_request_timeout_reads_as_kubectl_s(text: str, seconds: float) -> None:
    assert request_timeout(text) == seconds


@pytest.mark.parametrize("text", ["0", "0s", "-5", "soon", "inf", "nan"])
def test_a_request_timeout_that_bounds_nothing_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        request_timeout(text)


LIVE_COMMANDS = [
    ["get", "tfc"],
    ["decide", "--live", "tfc/web"],
    ["approve", "tfc/web"],
    ["plan", "show", "tfc/web"],
    ["restore", "tfc/web", "--serial", "3"],
    ["state", "list", "tfc/web"],
    ["state", "pull", "tfc/web"],
    ["state", "push", "tfc/web", "state.json"],
]


@pytest.mark.parametrize("argv", LIVE_COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_every_live_command_waits_out_a_fresh_api_server(
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Two 429s with a short Retry-After, then a 404: each command asks its first request
    three times, says so twice, and then fails on the 404 as it always did."""
    fresh = _error(429, "storage is (re)initializing", retry_after="0.01")
    script = Script(fresh, fresh, NOT_FOUND)

    @asynccontextmanager
    async def scripted(kubeconfig: str | None = None) -> AsyncIterator[Script]:
        yield script

    monkeypatch.setattr(runtime.transport, "open_transport", scripted)
    monkeypatch.chdir(tmp_path)
    Path("state.json").write_text('{"serial": 1, "lineage": "l"}')
    assert main([*argv, "--request-timeout", "5s"]) != 0
    first, *again = script.asked[:3]
    assert [asked[:2] for asked in again] == [first[:2]] * 2
    assert all(0 < deadline <= 5.0 for _, _, deadline in script.asked)
    printed = capsys.readouterr()
    assert printed.out == ""  # stdout is the command's (`state pull` writes the state there)
    waits = [line for line in printed.err.splitlines() if "waiting" in line]
    assert len(waits) == 2
    assert "429 TooManyRequests: storage is (re)initializing; waiting 0.01s" in waits[0]


@pytest.mark.parametrize("argv", LIVE_COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_every_live_command_takes_the_flag_with_a_default(argv: list[str]) -> None:
    assert parser().parse_args(argv).request_timeout == 60.0
    assert parser().parse_args([*argv, "--request-timeout", "2m"]).request_timeout == 120.0
