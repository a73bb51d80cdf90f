"""Converting CAPTF objects between v1alpha1 and v1beta1, in process: round trips of
objects drawn from the CRD schemas lose nothing, and the one field that leaves v1alpha1
comes back from the annotation. tests/kube/test_conversion.py runs the same round trips
through the real API server's conversion path."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_CONVERSION_DATA, API_VERSION, OLD_API_VERSION
from controller.core.conversion.convert import ConversionFailed, convert
from runtime.jsonobj import Json
from tests.crd_objects import crd_object

CRDS = sorted((Path(__file__).resolve().parents[4] / "manifests" / "crds").glob("*.yaml"))


STRATEGIES = {
    (path, version): crd_object(yaml.safe_load(path.read_text()), version)
    for path in CRDS
    for version in ("v1alpha1", "v1beta1")
}


def _cluster(spec: Json, annotations: dict[str, str] | None = None) -> Json:
    meta: Json = {"name": "c1", "namespace": "ns"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": OLD_API_VERSION,
        "kind": "TerraformCluster",
        "metadata": meta,
        "spec": spec,
    }


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem.split("_")[1])
@settings(max_examples=25)
@given(data=st.data())
def test_v1alpha1_to_v1beta1_and_back_is_identity(path: Path, data: Any) -> None:
    obj = data.draw(STRATEGIES[path, "v1alpha1"])
    before = copy.deepcopy(obj)
    there = convert(obj, API_VERSION)
    assert there["apiVersion"] == API_VERSION
    there_before = copy.deepcopy(there)
    assert convert(there, OLD_API_VERSION) == obj
    # Neither conversion wrote into what it was given (the answer shares its status).
    assert obj == before
    assert there == there_before


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.stem.split("_")[1])
@settings(max_examples=25)
@given(data=st.data())
def test_v1beta1_to_v1alpha1_and_back_is_identity(path: Path, data: Any) -> None:
    obj = data.draw(STRATEGIES[path, "v1beta1"])
    before = copy.deepcopy(obj)
    back = convert(convert(obj, OLD_API_VERSION), API_VERSION)
    assert back == obj
    assert obj == before


def test_credentials_ref_becomes_an_identity_ref_of_kind_secret_and_comes_back() -> None:
    old = _cluster({"credentialsRef": {"name": "creds"}, "jobs": {"image": "captf:dev"}})
    new = convert(old, API_VERSION)
    assert new["spec"] == {
        "identityRef": {"kind": "Secret", "name": "creds"},
        "jobs": {"image": "captf:dev"},
    }
    kept = json.loads(new["metadata"]["annotations"][ANN_CONVERSION_DATA])
    assert kept == {
        "credentialsRef": {"ref": {"name": "creds"}, "into": {"kind": "Secret", "name": "creds"}}
    }
    assert convert(new, OLD_API_VERSION) == old


def test_an_identity_ref_changed_since_is_the_one_in_force() -> None:
    """Changed through v1beta1 after the conversion: read as v1alpha1 it stays the
    identityRef, and the stale annotation goes."""
    new = convert(_cluster({"credentialsRef": {"name": "creds"}}), API_VERSION)
    new["spec"]["identityRef"] = {"kind": "TerraformClusterIdentity", "name": "aws"}
    old = convert(new, OLD_API_VERSION)
    assert old["spec"] == {"identityRef": {"kind": "TerraformClusterIdentity", "name": "aws"}}
    assert "annotations" not in old["metadata"]


def test_both_set_keeps_the_identity_ref_in_force_and_gives_both_back() -> None:
    """Stored before the rule against both: the identityRef was the one in force."""
    spec = {
        "identityRef": {"kind": "TerraformClusterIdentity", "name": "aws"},
        "credentialsRef": {"name": "c"},
    }
    new = convert(_cluster(spec), API_VERSION)
    assert new["spec"] == {"identityRef": {"kind": "TerraformClusterIdentity", "name": "aws"}}
    assert convert(new, OLD_API_VERSION)["spec"] == spec


def test_templates_convert_their_template_spec() -> None:
    spec = {"template": {"spec": {"credentialsRef": {"name": "creds"}}}}
    old = {
        "apiVersion": OLD_API_VERSION,
        "kind": "TerraformMachineTemplate",
        "metadata": {"name": "t"},
        "spec": spec,
    }
    new = convert(old, API_VERSION)
    assert new["spec"]["template"]["spec"] == {"identityRef": {"kind": "Secret", "name": "creds"}}
    assert convert(new, OLD_API_VERSION) == old


def test_a_hand_written_annotation_says_nothing() -> None:
    """One a v1alpha1 writer sets is dropped going up; one that is no JSON is ignored
    going down."""
    old = _cluster(
        {"jobs": {}}, {ANN_CONVERSION_DATA: '{"credentialsRef": {"ref": {"name": "x"}}}', "a": "b"}
    )
    assert convert(old, API_VERSION)["metadata"]["annotations"] == {"a": "b"}
    new = {**_cluster({"jobs": {}}, {ANN_CONVERSION_DATA: "not json"}), "apiVersion": API_VERSION}
    assert convert(new, OLD_API_VERSION)["metadata"] == {"name": "c1", "namespace": "ns"}


def test_same_version_is_a_copy_and_others_are_refused() -> None:
    obj = _cluster({"credentialsRef": {"name": "c"}})
    same = convert(obj, OLD_API_VERSION)
    assert same == obj
    assert same is not obj
    with pytest.raises(ConversionFailed, match="not a version of"):
        convert(obj, "infrastructure.cluster.x-k8s.io/v2")
    with pytest.raises(ConversionFailed, match="cannot convert from apps/v1"):
        convert({**obj, "apiVersion": "apps/v1"}, API_VERSION)
