"""A pass whose object is deleted while it runs (its last finalizer removed by another
pass, by hand) ends quietly on the 404 for the object itself; a 404 for anything else
the pass writes stays an error."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.core.basics.names import CLUSTER
from controller.core.decide.settings import Settings
from controller.core.spec.policy import RunnerPolicy
from controller.io import api
from controller.io.accountant import JobMetrics
from controller.io.caches import Caches
from controller.io.keys import key_of
from controller.io.reconciler import Reconciler
from runtime.clock import SteppedClock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from runtime.loop import DONE, Result, Unrecognized, outcome_of
from tests.builders import NOW, NS, captf, module_configmap, owners_of, secret
from tests.fakeapi import FakeApi

STATUS = api.status_path(captf())
KEY = key_of(CLUSTER, NS, "c1")


class Racing(FakeApi):
    """Runs `first` once, just before the object's status write reaches the server."""

    def __init__(self, first: Callable[[], None]) -> None:
        super().__init__()
        self.first: Callable[[], None] | None = first

    async def request(self, method: str, path: str, **kwargs: Any) -> Json:
        if self.first is not None and method == "PATCH" and path == STATUS:
            first, self.first = self.first, None
            first()
        return await super().request(method, path, **kwargs)


def _world(fake: FakeApi) -> None:
    fake.create(api.secret_path(NS), secret("creds", {"token": "t"}))
    fake.create(f"/api/v1/namespaces/{NS}/configmaps", module_configmap())
    fake.create(api.object_path(CLUSTER, NS), captf())
    for obj in owners_of(captf()):
        if obj["kind"] == "Secret":
            fake.create(api.secret_path(NS), obj)
        else:
            fake.create(api.resource_path(api.CAPI_OBJECTS[obj["kind"]], NS), obj)


def _reconciler(fake: FakeApi) -> tuple[Reconciler, Caches]:
    clock = SteppedClock(NOW)
    caches = Caches(fake, clock=clock, namespace=NS)
    settings = Settings(max_concurrent_runs=2, slot_namespace=NS, runner=RunnerPolicy())
    metrics = JobMetrics(CollectorRegistry())
    return Reconciler(fake, caches, clock, metrics, settings=settings), caches


async def _pass(fake: Racing) -> Result:
    _world(fake)
    reconciler, caches = _reconciler(fake)
    fake.sync(caches)
    result = await reconciler.reconcile(KEY)
    assert fake.first is None  # the pass came to its status write
    return result


async def test_a_status_write_after_the_object_is_gone_ends_the_pass_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Its deletion completes (the last finalizer removed elsewhere) while the pass runs.
    fake = Racing(lambda: fake.collection(api.object_path(CLUSTER, NS)).clear())
    with caplog.at_level(logging.INFO):
        result = await _pass(fake)
    assert result == DONE
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert fake.of("terraformclusters") == []


def _secret_not_found() -> None:
    # A 404 naming another resource, even one of the object's own name.
    details = {"name": "c1", "kind": "secrets"}
    status = {"kind": "Status", "code": 404, "reason": "NotFound", "details": details}
    raise ApiError.from_status(status)


async def test_a_404_for_another_object_is_still_an_error() -> None:
    with pytest.raises(ApiError) as raised:
        await _pass(Racing(_secret_not_found))
    assert isinstance(outcome_of(raised.value), Unrecognized)
