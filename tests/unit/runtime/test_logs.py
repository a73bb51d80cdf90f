"""Structured logs: the fields of a reconcile on every record, in JSON and in text."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import anyio
import orjson
import pytest

from runtime import logs
from runtime.clock import LoopClock
from runtime.loop import DONE, Controller, Result, key_fields
from runtime.workqueue import RateLimitingQueue

log = logging.getLogger("captf.test")


class Collect(logging.Handler):
    """Keeps each record formatted in both formats, as the record was emitted."""

    def __init__(self) -> None:
        super().__init__()
        self.json: list[dict[str, object]] = []
        self.text: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.json.append(orjson.loads(logs.JsonFormatter().format(record)))
        self.text.append(logs.TextFormatter().format(record))


@pytest.fixture
def collected() -> Iterator[Collect]:
    handler = Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    old = root.level
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old)


def test_a_record_outside_any_reconcile_has_the_four_fields(collected: Collect) -> None:
    log.info("caches synced; reconciling with %d workers", 4)
    [record] = collected.json
    assert set(record) == {"time", "level", "logger", "message"}
    assert record["level"] == "info"
    assert record["logger"] == "captf.test"
    assert record["message"] == "caches synced; reconciling with 4 workers"
    assert str(record["time"]).endswith("Z")


def test_bound_fields_nest_and_unwind(collected: Collect) -> None:
    obj = {"kind": "TerraformCluster", "namespace": "team-a", "name": "c1"}
    with logs.bound(object=obj, reconcileID="r-1"):
        with logs.bound(job="c1-apply-0a1b2c3d"):
            log.info("started")
        log.warning("after", extra={"fields": {"job": "c1-drift-00000000"}})
    log.info("outside")
    started, after, outside = collected.json
    assert started["object"] == obj
    assert (started["reconcileID"], started["job"]) == ("r-1", "c1-apply-0a1b2c3d")
    assert (after["job"], after["level"]) == ("c1-drift-00000000", "warning")
    assert "object" not in outside
    assert collected.text[0].endswith(
        "captf.test: started object=TerraformCluster/team-a/c1 reconcileID=r-1 "
        "job=c1-apply-0a1b2c3d"
    )


def test_an_exception_goes_into_the_error_field(collected: Collect) -> None:
    try:
        raise ValueError("spec.template is not a mapping")
    except ValueError:
        log.exception("reconcile failed")
    assert "ValueError: spec.template is not a mapping" in str(collected.json[0]["error"])
    assert "Traceback" in collected.text[0]


@pytest.mark.parametrize(
    ("requested", "tty", "chosen"),
    [(None, True, "text"), (None, False, "json"), ("json", True, "json"), ("text", False, "text")],
)
def test_the_format_defaults_to_text_on_a_terminal(
    requested: str | None, tty: bool, chosen: str
) -> None:
    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    assert logs.choose(requested, Stream()) == chosen


def test_setup_writes_one_json_object_per_line() -> None:
    # The handler setup leaves goes after the test (tests/conftest.py's _root_logger_kept).
    out = io.StringIO()
    assert logs.setup("json", stream=out) == "json"
    with logs.bound(object={"kind": "K", "namespace": "n", "name": "x"}):
        logging.getLogger("captf").info("two\nlines")
    [line] = out.getvalue().splitlines()
    assert orjson.loads(line)["message"] == "two\nlines"


@pytest.mark.parametrize(
    ("key", "fields"),
    [
        ("team-a/c1", {"object": {"namespace": "team-a", "name": "c1"}}),
        ("cluster-scoped", {"key": "cluster-scoped"}),
        ("TerraformCluster/team-a/c1", {"key": "TerraformCluster/team-a/c1"}),
    ],
)
def test_key_fields(key: str, fields: dict[str, object]) -> None:
    assert key_fields(key) == fields


class Logging:
    """Logs once per reconcile, from inside a task it starts (context is inherited)."""

    async def reconcile(self, key: str) -> Result:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._log, key)
        return DONE

    async def _log(self, key: str) -> None:
        log.info("reconciling %s", key)


@pytest.mark.looptime
async def test_the_worker_loop_sets_object_and_a_fresh_reconcile_id(collected: Collect) -> None:
    clock = LoopClock()
    async with RateLimitingQueue[str](clock=clock) as queue:
        controller = Controller(
            "captf",
            Logging(),
            queue,
            clock=clock,
            log_fields=lambda key: {
                "object": dict(zip(("kind", "namespace", "name"), key.split("/"), strict=True))
            },
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(controller.run)
            queue.add("TerraformCluster/ns/a")
            await anyio.sleep(1)
            queue.add("TerraformCluster/ns/a")
            await anyio.sleep(1)
            tg.cancel_scope.cancel()
    first, second = [r for r in collected.json if r["logger"] == "captf.test"]
    assert first["object"] == {"kind": "TerraformCluster", "namespace": "ns", "name": "a"}
    assert first["controller"] == "captf"
    assert first["reconcileID"] != second["reconcileID"]
    assert len(str(first["reconcileID"])) == 36
