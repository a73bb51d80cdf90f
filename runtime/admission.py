"""Admission webhooks over HTTPS: AdmissionReview v1 in, an answer out (and CRD
conversion webhooks beside them: runtime/conversion.py).

Each path has a review: a coroutine that takes the review's `request` and answers
whether to allow it, why not, and (for a mutating webhook) a JSON patch. The server
knows nothing of what is reviewed. A body that is no AdmissionReview is answered 400;
a review that raises is answered 500: the API server then applies the webhook's
failurePolicy, as for a webhook that does not answer.

Every replica serves, leader or not: a review reads the request and asks the API server,
and keeps no state. The port is bound with SO_REUSEPORT, so replicas that share a
network (the local process node) all listen on one address and the kernel spreads the
connections, as a Service spreads them over pods. The certificate files are read again
when they change (cert-manager renews them in the mounted Secret), checked every
RELOAD_EVERY seconds."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio
import orjson
from aiohttp import web
from anyio.abc import TaskGroup

from runtime import conversion
from runtime.certs import CERT_FILE, KEY_FILE, tls_context
from runtime.conversion import Convert
from runtime.health import parse_address, serve
from runtime.jsonobj import Json

log = logging.getLogger("captf.admission")
API_VERSION = "admission.k8s.io/v1"
RELOAD_EVERY = 60.0


@dataclass(frozen=True)
class Answer:
    allowed: bool
    message: str = ""
    code: int = 403  # of a refusal: 403 Forbidden, or 400 for a malformed request
    patch: tuple[Json, ...] = field(default=())


ALLOW = Answer(allowed=True)
Review = Callable[[Json], Awaitable[Answer]]


def response_of(uid: str, answer: Answer) -> Json:
    """The AdmissionReview that answers the request `uid`."""
    response: Json = {"uid": uid, "allowed": answer.allowed}
    if not answer.allowed:
        reason = "BadRequest" if answer.code == 400 else "Forbidden"
        response["status"] = {"code": answer.code, "reason": reason, "message": answer.message}
    if answer.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(answer.patch)).encode()).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


class AdmissionServer:
    """`async with AdmissionServer({"/validate": review}, address=...)`: serves until the
    block ends. `conversions` are CRD conversion webhooks by path (runtime/conversion.py).
    `cert_dir` holds tls.crt and tls.key; None makes a self-signed pair."""

    def __init__(
        self,
        reviews: Mapping[str, Review],
        *,
        address: str,
        cert_dir: Path | None = None,
        conversions: Mapping[str, Convert] | None = None,
    ) -> None:
        self._reviews = dict(reviews)
        self._conversions = dict(conversions or {})
        self._host, self._port = parse_address(address)
        self._cert_dir = cert_dir
        self._runner: web.AppRunner | None = None
        self._reloading: TaskGroup | None = None
        self._stack = contextlib.AsyncExitStack()

    @property
    def port(self) -> int:
        return self._port

    async def __aenter__(self) -> Self:
        app = web.Application()
        for path in self._reviews:
            app.router.add_post(path, self._handle)
        for path in self._conversions:
            app.router.add_post(path, self._convert)
        with tempfile.TemporaryDirectory(prefix="captf-webhook-") as work:
            context = tls_context(self._cert_dir, Path(work))
        self._runner, self._port = await serve(
            app, self._host, self._port, ssl_context=context, reuse_port=True
        )
        if self._cert_dir is not None:
            group = await self._stack.enter_async_context(anyio.create_task_group())
            group.start_soon(_reload_forever, context, self._cert_dir)
            self._reloading = group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._reloading is not None:
            self._reloading.cancel_scope.cancel()
            self._reloading = None
        await self._stack.aclose()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            review = body["request"]
            uid = str(review["uid"])
        except (ValueError, KeyError, TypeError):
            return web.Response(status=400, text="expected an AdmissionReview with a request\n")
        answer = await self._reviews[request.path](review)
        return web.json_response(response_of(uid, answer))

    async def _convert(self, request: web.Request) -> web.Response:
        # orjson: a list read in a version it is not stored in is one review of up to a
        # page of objects, each converted here.
        try:
            body = orjson.loads(await request.read())
            answered = conversion.answer(body, self._conversions[request.path])
        except (orjson.JSONDecodeError, conversion.Malformed) as error:
            return web.Response(status=400, text=f"{error}\n")
        return web.Response(body=orjson.dumps(answered), content_type="application/json")


def _stamp(cert_dir: Path) -> tuple[float, float]:
    return ((cert_dir / CERT_FILE).stat().st_mtime, (cert_dir / KEY_FILE).stat().st_mtime)


async def _reload_forever(context: ssl.SSLContext, cert_dir: Path) -> None:
    """Loads the pair again into `context` whenever its files change: new connections
    get the renewed certificate, open ones keep theirs."""
    seen = _stamp(cert_dir)
    while True:
        await anyio.sleep(RELOAD_EVERY)
        try:
            now = _stamp(cert_dir)
            if now != seen:
                context.load_cert_chain(cert_dir / CERT_FILE, cert_dir / KEY_FILE)
                seen = now
                log.info("webhook serving certificate reloaded from %s", cert_dir)
        except (OSError, ssl.SSLError) as error:
            # Mid-update (a Secret volume swaps its files at once, but not both stats);
            # the old pair keeps serving until the next look.
            log.warning("webhook certificate not reloaded: %s", error)
