"""The API server's version, for --module-image-mount=auto."""

from __future__ import annotations

import pytest

from controller.io.server_version import server_version
from runtime.errors import ApiError


class Answers:
    def __init__(self, answer: dict[str, object] | Exception) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def request(self, method: str, path: str) -> dict[str, object]:
        self.asked.append(f"{method} {path}")
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "version"),
    [
        ({"major": "1", "minor": "35", "gitVersion": "v1.35.4"}, (1, 35)),
        ({"major": "1", "minor": "33+"}, (1, 33)),
        ({"gitVersion": "v1.34.0"}, None),
        (ApiError.from_response(403, b"{}", {}), None),
        (TimeoutError(), None),
    ],
)
async def test_server_version(answer: dict[str, object] | Exception, version: object) -> None:
    api = Answers(answer)
    assert await server_version(api) == version
    assert api.asked == ["GET /version"]
