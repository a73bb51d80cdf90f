from __future__ import annotations

from collections.abc import Mapping

import pytest

from controller.runner.kube import TransportKube, retrying
from runtime.errors import ApiError
from runtime.jsonobj import Json


class ScriptedRequests:
    """Answers requests from a queue of results or errors; records them."""

    def __init__(self, *answers: Json | Exception) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, str, object, str]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109
    ) -> Json:
        self.sent.append((method, path, body, content_type))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.mark.looptime
async def test_transient_errors_are_retried() -> None:
    api = ScriptedRequests(
        ApiError(503, "ServiceUnavailable", "x"), ConnectionResetError(), {"ok": True}
    )
    kube = TransportKube(api, "ns")
    assert await kube.get_secret("s") == {"ok": True}
    assert len(api.sent) == 3


@pytest.mark.looptime
async def test_retry_after_is_honoured() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    api = ScriptedRequests(ApiError(429, "TooManyRequests", "x", retry_after=7.0), {})
    await retrying(lambda: api.request("GET", "/"), sleep=sleep)
    assert slept == [7.0]


@pytest.mark.looptime
async def test_retries_give_up_with_the_last_error() -> None:
    api = ScriptedRequests(*[ApiError(500, "InternalError", "x")] * 3)
    with pytest.raises(ApiError):
        await retrying(lambda: api.request("GET", "/"), delays=(1.0, 1.0))
    assert len(api.sent) == 3


async def test_conflicts_are_not_retried() -> None:
    api = ScriptedRequests(ApiError(409, "Conflict", "modified"), {})
    kube = TransportKube(api, "ns")
    with pytest.raises(ApiError):
        await kube.replace_secret("s", {"metadata": {"name": "s", "resourceVersion": "1"}})
    assert len(api.sent) == 1


async def test_not_found_reads_as_none() -> None:
    api = ScriptedRequests(ApiError(404, "NotFound", "x"), ApiError(404, "NotFound", "x"))
    kube = TransportKube(api, "ns")
    assert await kube.get_secret("s") is None
    await kube.delete_secret("s")  # already gone is fine
    assert api.sent[0][:2] == ("GET", "/api/v1/namespaces/ns/secrets/s")


async def test_list_uses_the_label_selector() -> None:
    api = ScriptedRequests({"items": [{"metadata": {"name": "a"}}]})
    kube = TransportKube(api, "ns")
    assert await kube.list_secrets("x=y") == [{"metadata": {"name": "a"}}]
