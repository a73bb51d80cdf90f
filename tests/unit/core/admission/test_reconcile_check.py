"""A spec the webhook refuses, stored while it was down, waits InvalidSpec at reconcile."""

from __future__ import annotations

import pytest

from controller.core.basics.names import Reason
from controller.core.decide import snapshot
from controller.core.decide.context import read_spec
from controller.core.spec.policy import RunnerPolicy
from runtime.jsonobj import Json
from tests.builders import base_objects, captf, decided


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"variables": {"captf_secret": "x"}}, "spec.variables.captf_secret"),
        ({"source": {"image": "Not An Image"}}, "spec.source.image"),
        ({"jobs": {"securityContext": {"privileged": True}}}, "spec.jobs.securityContext"),
    ],
)
def test_an_invalid_spec_waits_and_runs_nothing(spec: Json, field: str) -> None:
    obj = captf(spec=spec)
    if "source" in spec:
        obj["spec"]["source"].pop("configMapRef")
    decision = decided(obj, base_objects(applied=False))
    assert decision["reason"] == Reason.INVALID_SPEC
    assert decision["action"] == "requeue"  # a wait: no Job
    wait = read_spec(snapshot.build(obj, base_objects(applied=False)), RunnerPolicy()).wait
    assert wait is not None
    assert field in wait.message
    assert "Not An Image" not in wait.message


def test_a_valid_spec_is_not_held() -> None:
    decision = decided(captf(), base_objects(applied=False))
    assert decision["reason"] != Reason.INVALID_SPEC
