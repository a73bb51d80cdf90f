"""The AdmissionReview server over real HTTPS: answers carry the request's uid, a refusal
its code and message, a patch in base64 JSON; a body that is no review is a 400 and a
review that raises is a 500 (the API server then applies the failurePolicy)."""

from __future__ import annotations

import base64
import json
import ssl
from typing import Any

import aiohttp

from runtime.admission import ALLOW, AdmissionServer, Answer

Json = dict[str, Any]
NO_VERIFY = ssl.create_default_context()
NO_VERIFY.check_hostname = False
NO_VERIFY.verify_mode = ssl.CERT_NONE  # the self-signed pair of a unit test


async def _refuse(request: Json) -> Answer:
    return Answer(allowed=False, message=f"no {request['kind']['kind']}")


async def _patch(request: Json) -> Answer:
    return Answer(allowed=True, patch=({"op": "add", "path": "/spec/x", "value": 1},))


async def _raise(request: Json) -> Answer:
    raise RuntimeError("a bug")


async def _allow(request: Json) -> Answer:
    return ALLOW


async def _post(port: int, path: str, body: object) -> tuple[int, Json | None]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"https://127.0.0.1:{port}{path}", json=body, ssl=NO_VERIFY) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if resp.content_type == "application/json" else None


def _review(uid: str = "u1") -> Json:
    return {"request": {"uid": uid, "kind": {"kind": "Thing"}}}


async def test_answers_name_the_request_and_say_why() -> None:
    reviews = {"/no": _refuse, "/patch": _patch, "/bug": _raise, "/yes": _allow}
    async with AdmissionServer(reviews, address="127.0.0.1:0") as server:
        status, body = await _post(server.port, "/no", _review("abc"))
        assert status == 200
        assert body is not None
        assert body["kind"] == "AdmissionReview"
        assert body["response"]["uid"] == "abc"
        assert body["response"]["allowed"] is False
        assert body["response"]["status"] == {
            "code": 403,
            "reason": "Forbidden",
            "message": "no Thing",
        }
        status, body = await _post(server.port, "/patch", _review())
        assert body is not None
        assert body["response"]["patchType"] == "JSONPatch"
        assert json.loads(base64.b64decode(body["response"]["patch"])) == [
            {"op": "add", "path": "/spec/x", "value": 1}
        ]
        status, body = await _post(server.port, "/yes", _review())
        assert body is not None
        assert body["response"] == {"uid": "u1", "allowed": True}
        assert (await _post(server.port, "/yes", {"no": "request"}))[0] == 400
        assert (await _post(server.port, "/bug", _review()))[0] == 500
