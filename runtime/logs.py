"""Structured logs: one record per line, as JSON or as text, with the reconcile's context.

Every record carries time, level, logger and message; inside a reconcile also the
object (kind, namespace, name), the reconcile id and, where one is concerned, the
Job name, as controller-runtime's logs do. The context lives in a ContextVar set by
the worker loop, so code below it logs as usual and the fields follow; a record can
add or override fields with `extra={"fields": {...}}`.

JSON is for log pipelines (the Deployment's default); text for a person at a
terminal. Both carry the same fields."""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, TextIO

import orjson

JSON: Final = "json"
TEXT: Final = "text"
FORMATS: Final = (JSON, TEXT)

# The fields of the code running now: set by `bound`, read by both formatters.
_fields: ContextVar[Mapping[str, Any]] = ContextVar(
    "captf_log_fields", default=MappingProxyType({})
)


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Adds fields to every record logged inside the block (in this task and the tasks
    it starts); None values are left out."""
    merged = {**_fields.get(), **{k: v for k, v in fields.items() if v is not None}}
    token = _fields.set(merged)
    try:
        yield
    finally:
        _fields.reset(token)


def new_reconcile_id() -> str:
    """A fresh id per reconcile, as controller-runtime's reconcileID (a UUID)."""
    return str(uuid.uuid4())


def current() -> Mapping[str, Any]:
    return _fields.get()


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The context's fields, then the record's own (`extra={"fields": {...}}`)."""
    own = getattr(record, "fields", None)
    return {**_fields.get(), **(own if isinstance(own, Mapping) else {})}


def _time(record: logging.LogRecord) -> str:
    stamp = datetime.fromtimestamp(record.created, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """`{"time", "level", "logger", "message", <context fields>, "error"}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out |= fields_of(record)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value ...`, the same fields for a person to read."""

    def format(self, record: logging.LogRecord) -> str:
        head = f"{_time(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
        tail = " ".join(f"{k}={_text(v)}" for k, v in fields_of(record).items())
        line = f"{head} {tail}" if tail else head
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text(value: object) -> str:
    if isinstance(value, Mapping):
        return "/".join(str(v) for v in value.values() if v)
    text = str(value)
    return orjson.dumps(text).decode() if not text or " " in text or "=" in text else text


def choose(requested: str | None, stream: TextIO) -> str:
    """The format asked for; with none, text on a terminal and JSON otherwise."""
    if requested is not None:
        if requested not in FORMATS:
            raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {requested!r}")
        return requested
    return TEXT if stream.isatty() else JSON


def setup(
    requested: str | None = None, *, level: int = logging.INFO, stream: TextIO | None = None
) -> str:
    """Configures the root logger to write one format to `stream` (default stderr);
    returns the format chosen."""
    out = stream or sys.stderr
    chosen = choose(requested, out)
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter() if chosen == JSON else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return chosen
