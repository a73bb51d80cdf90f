"""A fault proxy in front of moto: the AWS provider's calls pass through it, and it answers
some of them as a troubled AWS would (a throttle, a capacity shortfall, an expired
token, a 5xx), or stops listening altogether, so the provider's own error texts reach
the runner as they would from AWS.

Every call is relayed on a connection of its own (HTTP/1.0), so going down refuses the
very next call instead of leaving a kept-alive connection served. The proxy reads only
what routes a fault: the service of the request's SigV4 scope and its action (the
`Action` of a query-protocol form, or the JSON protocols' X-Amz-Target)."""

from __future__ import annotations

import http.client
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

# The SigV4 credential scope names the service: Credential=AKID/date/region/SERVICE/...
_SCOPE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/")
# Relayed headers that describe the connection, not the message.
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "proxy-connection"})


@dataclass(frozen=True)
class Fault:
    """An answer in place of AWS's: the status, and the error code its body carries
    (None: an empty body, which the SDK reports as `UnknownError`)."""

    status: int
    code: str | None = None
    message: str = "injected by the fault proxy"


THROTTLED = Fault(503, "RequestLimitExceeded", "Request limit exceeded.")
RATE_EXCEEDED = Fault(400, "Throttling", "Rate exceeded")
NO_CAPACITY = Fault(500, "InsufficientInstanceCapacity", "We currently do not have capacity.")
EXPIRED = Fault(400, "ExpiredToken", "The security token included in the request is expired")
UNAVAILABLE = Fault(503)


@dataclass
class Rule:
    """Answer calls of `service` (and `action`, when given) with `fault`, `times` times
    (None: every time)."""

    fault: Fault
    service: str | None = None
    action: str | None = None
    times: int | None = None

    def takes(self, service: str, action: str) -> bool:
        if self.times == 0:
            return False
        return (self.service in (None, service)) and (self.action in (None, action))


@dataclass
class Call:
    service: str
    action: str
    status: int  # what the caller got
    faulted: bool


@dataclass
class _State:
    rules: list[Rule] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    down_after: str | None = None  # go down once this action's answer is relayed
    lock: threading.Lock = field(default_factory=threading.Lock)


class FaultProxy:
    """The proxy on a loopback port, relaying to `upstream` (moto's URL)."""

    def __init__(self, upstream: str) -> None:
        self._upstream = urllib.parse.urlsplit(upstream)
        self._state = _State()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.went_down = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def calls(self) -> list[Call]:
        with self._state.lock:
            return list(self._state.calls)

    def fault(self, rule: Rule) -> None:
        with self._state.lock:
            self._state.rules.append(rule)

    def heal(self) -> None:
        """No more faults; calls pass again."""
        with self._state.lock:
            self._state.rules.clear()
            self._state.down_after = None

    def down_after(self, action: str) -> None:
        """Stop listening right after relaying the answer to the next `action` call."""
        with self._state.lock:
            self._state.down_after = action

    def up(self) -> None:
        """Listen (again) on the same port."""
        if self._server is not None:
            return
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fault-proxy")
        self._thread.start()
        self.went_down.clear()

    def down(self) -> None:
        """Stop listening: every call is refused until `up`."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self.went_down.set()

    def __enter__(self) -> FaultProxy:
        self.up()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.down()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                proxy._serve(self)

            def do_POST(self) -> None:
                proxy._serve(self)

            def do_PUT(self) -> None:
                proxy._serve(self)

            def do_DELETE(self) -> None:
                proxy._serve(self)

            def do_HEAD(self) -> None:
                proxy._serve(self)

        return Handler

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        service, action = _route(handler, body)
        fault = self._take(service, action)
        answer = _fault_answer(fault, service) if fault is not None else self._relay(handler, body)
        # Recorded before the caller has its answer, so a caller reads its own calls.
        with self._state.lock:
            self._state.calls.append(Call(service, action, answer.status, fault is not None))
            stop = fault is None and self._state.down_after == action
            if stop:
                self._state.down_after = None
        if stop:
            # Down before the answer leaves: the caller's next call, which waits for it,
            # finds nothing listening (refused), never a connection accepted then dropped.
            self.down()
        answer.send(handler)

    def _take(self, service: str, action: str) -> Fault | None:
        with self._state.lock:
            for rule in self._state.rules:
                if rule.takes(service, action):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule.fault
        return None

    def _relay(self, handler: BaseHTTPRequestHandler, body: bytes) -> _Answer:
        upstream = http.client.HTTPConnection(
            self._upstream.hostname or "127.0.0.1", self._upstream.port, timeout=60
        )
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            got = upstream.getresponse()
            data = got.read()
        finally:
            upstream.close()
        kept = [
            (key, value)
            for key, value in got.getheaders()
            if key.lower() not in _HOP and key.lower() != "content-length"
        ]
        return _Answer(got.status, kept, data)


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def send(self, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(self.status)
        for key, value in self.headers:
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(self.body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(self.body)


def _route(handler: BaseHTTPRequestHandler, body: bytes) -> tuple[str, str]:
    """The call's service and action, as far as the request says them."""
    scope = _SCOPE.search(handler.headers.get("Authorization") or "")
    service = scope.group(1) if scope else ""
    target = handler.headers.get("X-Amz-Target")
    if target:
        return service, target.rsplit(".", 1)[-1]
    form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query)
    action = (form.get("Action") or query.get("Action") or [""])[0]
    return service, action


def _fault_answer(fault: Fault, service: str) -> _Answer:
    """The fault in the error shape the service's protocol has: EC2's own XML, the
    query protocol's for the others; nothing at all for a bare status."""
    if fault.code is None:
        data = b""
    elif service == "ec2":
        data = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"<Code>{fault.code}</Code><Message>{fault.message}</Message></Error></Errors>"
            "<RequestID>fault-proxy</RequestID></Response>"
        ).encode()
    else:
        data = (
            "<ErrorResponse><Error><Type>Sender</Type>"
            f"<Code>{fault.code}</Code><Message>{fault.message}</Message></Error>"
            "<RequestId>fault-proxy</RequestId></ErrorResponse>"
        ).encode()
    return _Answer(fault.status, [("Content-Type", "text/xml")], data)
