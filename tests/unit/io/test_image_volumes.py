"""Whether the API server keeps image volumes, for --module-image-mount=auto: a dry-run
Job's answer, and nothing (the version decides) when the dry run is refused."""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from controller.io.image_volumes import image_volumes_kept, probe_job
from runtime.errors import ApiError


def _dropped(job: dict[str, Any]) -> dict[str, Any]:
    """What an API server with ImageVolume off stores: the image volume is gone."""
    stored = copy.deepcopy(job)
    del stored["spec"]["template"]["spec"]["volumes"]
    return stored


FORBIDDEN = ApiError.from_response(
    403,
    b'{"kind":"Status","code":403,"reason":"Forbidden","message":"jobs.batch is forbidden"}',
    {},
)


class DryRun:
    """Answers the dry run as a server would: with what it would store, or an error."""

    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str, Mapping[str, str] | None]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: object = None,
    ) -> dict[str, Any]:
        self.asked.append((method, path, params))
        if isinstance(self.answer, Exception):
            raise self.answer
        assert isinstance(body, dict)
        return copy.deepcopy(body) if self.answer == "kept" else _dropped(body)


@pytest.mark.parametrize(
    ("answer", "kept"),
    [("kept", True), ("dropped", False), (FORBIDDEN, None), (TimeoutError(), None)],
)
async def test_the_dry_run_s_answer_says_whether_image_volumes_are_kept(
    answer: str | Exception, kept: bool | None, caplog: pytest.LogCaptureFixture
) -> None:
    api = DryRun(answer)
    with caplog.at_level(logging.WARNING, logger="captf"):
        assert await image_volumes_kept(api, "captf-system") is kept
    # One request, a dry run: nothing is ever stored.
    assert api.asked == [("POST", "/apis/batch/v1/namespaces/captf-system/jobs", {"dryRun": "All"})]
    warned = [r.getMessage() for r in caplog.records]
    if kept is None:
        # The log says the dry run was refused, what the server said, and what decides.
        [line] = warned
        assert "dry-run Job in namespace captf-system was refused" in line
        assert "the version decides" in line
        if answer is FORBIDDEN:
            assert "403 Forbidden: jobs.batch is forbidden" in line
    else:
        assert warned == []


def test_the_probe_job_has_an_image_volume_that_nothing_mounts() -> None:
    pod = probe_job()["spec"]["template"]["spec"]
    assert [v for v in pod["volumes"] if "image" in v]
    assert all("volumeMounts" not in c for c in pod["containers"])
    assert "generateName" in probe_job()["metadata"]
