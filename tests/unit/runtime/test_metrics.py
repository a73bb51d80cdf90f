"""Metrics under controller-runtime's names, and the /healthz, /readyz, /metrics server."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from runtime.clock import ManualClock
from runtime.health import HealthServer, parse_address
from runtime.metrics import RuntimeMetrics
from runtime.workqueue import WorkQueue


def _value(registry: CollectorRegistry, metric: str, /, **labels: str) -> float | None:
    return registry.get_sample_value(metric, labels)


async def test_queue_metrics_follow_an_item_through_the_queue() -> None:
    registry, clock = CollectorRegistry(), ManualClock()
    q: WorkQueue[str] = WorkQueue(observer=RuntimeMetrics(registry).queue("jobs", clock))
    q.add("a")
    q.add("a")  # de-duplicated: not an add
    q.add("b")
    assert _value(registry, "workqueue_adds_total", name="jobs") == 2
    assert _value(registry, "workqueue_depth", name="jobs") == 2
    clock.advance(0.3)
    assert await q.get() == "a"
    assert _value(registry, "workqueue_depth", name="jobs") == 1
    assert _value(registry, "workqueue_queue_duration_seconds_count", name="jobs") == 1
    assert _value(registry, "workqueue_queue_duration_seconds_sum", name="jobs") == pytest.approx(
        0.3
    )
    clock.advance(2)
    q.done("a")
    assert _value(registry, "workqueue_work_duration_seconds_count", name="jobs") == 1
    assert _value(registry, "workqueue_work_duration_seconds_sum", name="jobs") == pytest.approx(2)


def test_reconcile_metrics_export_every_result_from_zero() -> None:
    registry = CollectorRegistry()
    rec = RuntimeMetrics(registry).reconcile("clusters")
    for result in ("success", "error", "requeue", "requeue_after"):
        assert (
            _value(
                registry, "controller_runtime_reconcile_total", controller="clusters", result=result
            )
            == 0
        )
    rec.reconciled("error", 0.5)
    rec.reconciled("success", 0.1)
    rec.unrecognized_error()
    total = "controller_runtime_reconcile_total"
    assert _value(registry, total, controller="clusters", result="error") == 1
    assert _value(registry, total, controller="clusters", result="success") == 1
    assert _value(registry, "controller_runtime_reconcile_errors_total", controller="clusters") == 1
    assert (
        _value(
            registry,
            "controller_runtime_reconcile_unrecognized_errors_total",
            controller="clusters",
        )
        == 1
    )
    assert (
        _value(registry, "controller_runtime_reconcile_time_seconds_count", controller="clusters")
        == 2
    )


def test_registries_are_isolated() -> None:
    one, two = CollectorRegistry(), CollectorRegistry()
    RuntimeMetrics(one).reconcile("c").reconciled("success", 1)
    RuntimeMetrics(two)  # would raise on a duplicate if collectors went to a shared registry
    assert (
        _value(two, "controller_runtime_reconcile_total", controller="c", result="success") is None
    )


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        (":9090", ("127.0.0.1", 9090)),
        ("[::1]:0", ("::1", 0)),
    ],
)
def test_parse_address(address: str, expected: tuple[str, int]) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize("address", ["8080", "localhost", "host:port"])
def test_parse_address_rejects_garbage(address: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        parse_address(address)


async def test_health_server_endpoints() -> None:
    registry = CollectorRegistry()
    RuntimeMetrics(registry).reconcile("clusters").reconciled("success", 0.2)
    synced = {"jobs": False, "clusters": True}
    async with HealthServer(registry, address="127.0.0.1:0") as server:
        server.add_readiness_check("jobs-synced", lambda: synced["jobs"])
        server.add_readiness_check("clusters-synced", lambda: synced["clusters"])
        base = f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as r:
                assert (r.status, await r.text()) == (200, "ok\n")
            async with http.get(f"{base}/readyz") as r:
                assert r.status == 503
                assert "[-] jobs-synced failed" in await r.text()
            synced["jobs"] = True
            async with http.get(f"{base}/readyz") as r:
                assert r.status == 200
                assert (await r.text()).endswith("ok\n")
            async with http.get(f"{base}/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain")
                text = await r.text()
    assert 'controller_runtime_reconcile_total{controller="clusters",result="success"} 1.0' in text
    # The server is gone once the block ends.
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            await http.get(f"{base}/healthz")
