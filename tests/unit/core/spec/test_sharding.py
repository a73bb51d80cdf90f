"""A shard's labels: the keys of a selector, and the labels copied onto what an object makes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.basics.names import MANAGED_BY
from controller.core.basics.runner_vars import RunnerVar
from controller.core.plan.launching import Launch, labelled_launch, labelled_secret
from controller.core.spec.sharding import (
    format_labels,
    parse_labels,
    selector_keys,
    shard_labels,
)
from controller.runner.env import from_environ
from runtime.jsonobj import Json


@pytest.mark.parametrize(
    ("selector", "keys"),
    [
        (None, ()),
        ("", ()),
        ("shard=a", ("shard",)),
        ("captf.io/shard==a", ("captf.io/shard",)),
        ("shard!=a", ("shard",)),
        ("sharding.captf.io/key in (shard1, shard2)", ("sharding.captf.io/key",)),
        ("shard notin (a,b),team=x", ("shard", "team")),
        ("!legacy, shard", ("legacy", "shard")),
        ("shard=a,shard!=b", ("shard",)),
    ],
)
def test_the_keys_a_selector_names(selector: str | None, keys: tuple[str, ...]) -> None:
    assert selector_keys(selector) == keys


def test_an_object_gives_its_labels_of_the_keys_only() -> None:
    obj = {"metadata": {"labels": {"shard": "a", "team": "x", "other": "y"}}}
    assert shard_labels(obj, ("shard", "missing")) == {"shard": "a"}
    assert shard_labels({"metadata": {}}, ("shard",)) == {}


_label = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,10}[a-z0-9])?", fullmatch=True)


@given(st.dictionaries(_label, _label, max_size=4))
def test_labels_survive_the_runners_environment(labels: dict[str, str]) -> None:
    assert parse_labels(format_labels(labels)) == labels


def _launch() -> Launch:
    container = {"name": "runner", "env": [{"name": "CAPTF_OP", "value": "apply"}]}
    job: Json = {
        "metadata": {"name": "c-apply-1", "labels": {"captf.io/name": "c"}},
        "spec": {
            "template": {
                "metadata": {"labels": {"captf.io/name": "c"}},
                "spec": {"containers": [container]},
            }
        },
    }
    secret: Json = {"metadata": {"name": "c-inputs-1", "labels": {"captf.io/name": "c"}}}
    return Launch(job=job, inputs_secret=secret, claims=())


def test_a_launch_carries_the_shard_labels_on_its_job_pod_secret_and_runner() -> None:
    before = _launch()
    after = labelled_launch(before, {"shard": "a"})
    assert after.job["metadata"]["labels"] == {"captf.io/name": "c", "shard": "a"}
    template = after.job["spec"]["template"]
    assert template["metadata"]["labels"] == {"captf.io/name": "c", "shard": "a"}
    env = template["spec"]["containers"][0]["env"]
    assert env[-1] == {"name": RunnerVar.SHARD_LABELS, "value": "shard=a"}
    assert after.inputs_secret is not None
    assert after.inputs_secret["metadata"]["labels"] == {"captf.io/name": "c", "shard": "a"}
    # The plan's own objects are not changed in place.
    assert before == _launch()
    assert labelled_launch(before, {}) is before


def test_a_secret_body_takes_the_labels_without_losing_its_own() -> None:
    body: Json = {"metadata": {"name": "s", "labels": {"captf.io/name": "c"}}}
    assert labelled_secret(body, {"shard": "a"}) == {
        "metadata": {"name": "s", "labels": {"shard": "a", "captf.io/name": "c"}}
    }
    assert labelled_secret(None, {"shard": "a"}) is None


def test_the_runner_labels_what_it_writes_with_the_shard_labels() -> None:
    env = {
        "CAPTF_OP": "apply",
        "CAPTF_NAMESPACE": "ns",
        "CAPTF_JOB_NAME": "c-apply-1",
        "CAPTF_OBJECT_NAME": "c",
        "CAPTF_OBJECT_KIND": "TerraformCluster",
        "CAPTF_INPUTS_SECRET": "c-inputs-1",
        "CAPTF_INPUTS_HASH": "h",
        "CAPTF_STATE_SECRET": "c-state",
    }
    assert from_environ(env).written_labels == MANAGED_BY
    sharded = from_environ(env | {RunnerVar.SHARD_LABELS: "shard=a"})
    assert sharded.written_labels == {"shard": "a"} | MANAGED_BY
