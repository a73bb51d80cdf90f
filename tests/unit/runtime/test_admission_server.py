"""The AdmissionReview server over real HTTPS: answers carry the request's uid, a refusal
its code and message, a patch in base64 JSON; a body that is no review is a 400 and a
review that raises is a 500 (the API server then applies the failurePolicy). A
ConversionReview beside them is answered whole: every object converted, or a Failure."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import ssl
import time
from pathlib import Path

import aiohttp
import anyio
import pytest

from runtime import admission
from runtime.admission import ALLOW, AdmissionServer, Answer
from runtime.certs import self_signed
from runtime.conversion import Refused
from runtime.jsonobj import Json

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


async def _served_certificate(port: int) -> bytes:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=NO_VERIFY)
    try:
        der: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return der
    finally:
        writer.close()


async def test_a_renewed_certificate_is_served_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cert-manager renews the pair in the mounted Secret; new connections get it."""
    monkeypatch.setattr(admission, "RELOAD_EVERY", 0.05)
    first, renewed = tmp_path / "first", tmp_path / "renewed"
    first.mkdir()
    renewed.mkdir()
    self_signed(first)
    self_signed(renewed)
    mounted = tmp_path / "mounted"
    shutil.copytree(first, mounted)
    async with AdmissionServer({"/yes": _allow}, address="127.0.0.1:0", cert_dir=mounted) as server:
        old = await _served_certificate(server.port)
        assert old == ssl.PEM_cert_to_DER_cert((first / "tls.crt").read_text())
        for name in ("tls.crt", "tls.key"):
            (mounted / name).write_bytes((renewed / name).read_bytes())
            os.utime(mounted / name, (time.time() + 5, time.time() + 5))  # a new stamp
        new = ssl.PEM_cert_to_DER_cert((renewed / "tls.crt").read_text())
        with anyio.fail_after(10):
            while True:  # until the loader's next look
                if await _served_certificate(server.port) == new:
                    break
                await anyio.sleep(0.05)


def _upper(obj: Json, api_version: str) -> Json:
    if obj.get("refuse"):
        raise Refused("cannot convert that one")
    return obj | {"apiVersion": api_version, "name": str(obj.get("name", "")).upper()}


def _conversion(*objects: Json, uid: str = "c1") -> Json:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": "g/v2", "objects": list(objects)},
    }


async def test_a_conversion_review_converts_every_object_or_fails_whole() -> None:
    async with AdmissionServer(
        {}, address="127.0.0.1:0", conversions={"/convert": _upper}
    ) as server:
        status, body = await _post(
            server.port, "/convert", _conversion({"name": "a"}, {"name": "b"})
        )
        assert status == 200
        assert body is not None
        assert body["kind"] == "ConversionReview"
        assert body["response"]["uid"] == "c1"
        assert body["response"]["result"] == {"status": "Success"}
        assert body["response"]["convertedObjects"] == [
            {"name": "A", "apiVersion": "g/v2"},
            {"name": "B", "apiVersion": "g/v2"},
        ]
        _, body = await _post(server.port, "/convert", _conversion({"name": "a"}, {"refuse": 1}))
        assert body is not None
        assert body["response"]["result"] == {
            "status": "Failure",
            "message": "cannot convert that one",
        }
        assert body["response"]["convertedObjects"] == []
        for malformed in ({}, {"request": {"uid": "x"}}, {"request": {"uid": "x", "objects": []}}):
            status, _ = await _post(server.port, "/convert", malformed)
            assert status == 400
