"""/metrics behind a bearer token: HTTPS only, 401 without a user, 403 without the grant,
the metrics with it; one review per token for a while."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from runtime.clock import SteppedClock
from runtime.errors import ApiError
from runtime.metrics_auth import REVIEW_TTL, KubeReviewer, SecureMetricsServer


class FakeApi:
    """Answers TokenReview and SubjectAccessReview from two tables, counting requests."""

    def __init__(self, users: dict[str, str], readers: set[str]) -> None:
        self.users, self.readers = users, readers
        self.requests: list[str] = []

    async def request(self, method: str, path: str, *, body: Any = None) -> dict[str, Any]:
        self.requests.append(path.rsplit("/", 1)[1])
        spec = body["spec"]
        if path.endswith("tokenreviews"):
            user = self.users.get(spec["token"])
            if user is None:
                return {"status": {"authenticated": False}}
            return {"status": {"authenticated": True, "user": {"username": user, "groups": []}}}
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] in self.readers}}


async def _get(port: int, token: str | None, scheme: str = "https") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{scheme}://127.0.0.1:{port}/metrics", headers=headers, ssl=False) as answer,
    ):
        return answer.status, await answer.text()


@pytest.mark.parametrize(
    ("token", "status"),
    [(None, 401), ("unknown", 401), ("alice-token", 403), ("prometheus-token", 200)],
)
async def test_only_allowed_users_read_metrics(token: str | None, status: int) -> None:
    registry = CollectorRegistry()
    Counter("captf_test_scrapes", "a metric to find", registry=registry).inc()
    api = FakeApi({"alice-token": "alice", "prometheus-token": "prometheus"}, {"prometheus"})
    reviewer = KubeReviewer(api, SteppedClock())
    async with SecureMetricsServer(registry, reviewer, address="127.0.0.1:0") as server:
        got, text = await _get(server.port, token)
    assert got == status
    assert ("captf_test_scrapes_total 1.0" in text) == (status == 200)


async def test_plain_http_gets_no_metrics() -> None:
    reviewer = KubeReviewer(FakeApi({}, set()), SteppedClock())
    async with SecureMetricsServer(CollectorRegistry(), reviewer, address="127.0.0.1:0") as server:
        with pytest.raises(aiohttp.ClientError):
            await _get(server.port, "t", scheme="http")


async def test_a_token_is_reviewed_once_per_ttl() -> None:
    api = FakeApi({"p": "prometheus"}, {"prometheus"})
    clock = SteppedClock()
    reviewer = KubeReviewer(api, clock)
    assert [await reviewer.status("p") for _ in range(3)] == [200, 200, 200]
    assert api.requests == ["tokenreviews", "subjectaccessreviews"]
    await clock.advance(REVIEW_TTL)
    assert await reviewer.status("p") == 200
    assert len(api.requests) == 4


async def test_an_api_server_that_cannot_answer_lets_nobody_in() -> None:
    class Down:
        async def request(self, method: str, path: str, *, body: Any = None) -> dict[str, Any]:
            raise ApiError(503, "ServiceUnavailable", "down")

    reviewer = KubeReviewer(Down(), SteppedClock())
    async with SecureMetricsServer(CollectorRegistry(), reviewer, address="127.0.0.1:0") as server:
        assert (await _get(server.port, "t"))[0] == 503


def test_starting_the_controller_does_not_import_cryptography() -> None:
    # cryptography holds about 10 MiB resident for the life of the process; only a
    # self-signed serving certificate needs it, so it is imported there.
    code = "import sys, controller.io.main; print('cryptography' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
