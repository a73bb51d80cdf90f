"""Round trips through the real API server's conversion path, objects of every kind drawn
from the CRD schemas (tests/crd_objects.py): written as one version with its status, read
as the other, written back whole as that one, read as the first again: the same object.
The API server calls the controller's conversion webhook (served on loopback from a
thread, with its certificate in the CRDs' caBundle) for every read and write in the
version an object is not stored in, and validates and prunes each result against the
version's schema, so a field lost or mangled on either way shows here.

An example the API server refuses (a CEL rule the strategies do not know of) is skipped:
it tests nothing of the conversion. Each runs on a server of its own (the CRDs there
point at this module's webhook, which no other test serves)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_CONVERSION_DATA, GROUP
from runtime.envtest import ApiServer, RequestFailed
from runtime.envtest.process import terminate_as_interrupt
from runtime.jsonobj import Json
from tests.conversion_support import current_crds, threaded_conversion, write_crds
from tests.crd_objects import crd_object

pytestmark = pytest.mark.kube
NAMESPACE = "roundtrip"
CRDS: dict[str, Json] = {}
# What the API server sets and a write back changes: never part of the comparison.
# (generation stays: a write back that changed the spec would move it).
SERVER_SET = ("resourceVersion", "managedFields", "uid", "creationTimestamp")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    work = tmp_path_factory.mktemp("conversion")
    with (
        terminate_as_interrupt(),
        threaded_conversion(work / "certs") as webhook,
        ApiServer() as running,
    ):
        crds = current_crds(webhook)
        running.install_crds(write_crds(crds, work / "crds"))
        running.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        CRDS.update({c["spec"]["names"]["kind"]: c for c in crds})
        yield running


def _path(crd: Json, version: str, name: str = "", sub: str = "") -> str:
    plural = crd["spec"]["names"]["plural"]
    scope = f"namespaces/{NAMESPACE}/" if crd["spec"]["scope"] == "Namespaced" else ""
    path = f"/apis/{GROUP}/{version}/{scope}{plural}"
    return "/".join(p for p in (path, name, sub) if p)


def _comparable(obj: Json) -> Json:
    meta = {k: v for k, v in obj["metadata"].items() if k not in SERVER_SET}
    return {**obj, "metadata": meta}


def _write_whole(server: ApiServer, crd: Json, version: str, obj: Json) -> Json:
    """`obj` written as `version`: its spec and metadata, then its status, each over the
    stored resourceVersion. Returns what the server then shows as `version`."""
    name = obj["metadata"]["name"]
    current = server.request("GET", _path(crd, version, name))
    body = json.loads(json.dumps(obj))
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    written = server.request("PUT", _path(crd, version, name), body)
    if "status" in obj and "status" in (crd["spec"]["versions"][-1].get("subresources") or {}):
        body["metadata"]["resourceVersion"] = written["metadata"]["resourceVersion"]
        server.request("PUT", _path(crd, version, name, "status"), body)
    return server.request("GET", _path(crd, version, name))


def _round_trip(server: ApiServer, kind: str, obj: Json, first: str, other: str) -> None:
    crd = CRDS[kind]
    obj["metadata"]["name"] = f"{obj['metadata']['name']}-{first}"[:63]
    try:
        server.request("POST", _path(crd, first), obj)
    except RequestFailed as refused:
        assume(refused.status != 422)  # a rule the strategies do not draw around
        raise
    try:
        stored = _write_whole(server, crd, first, obj)
        seen = server.request("GET", _path(crd, other, obj["metadata"]["name"]))
        assert seen["apiVersion"] == f"{GROUP}/{other}"
        _write_whole(server, crd, other, seen)
        again = server.request("GET", _path(crd, first, obj["metadata"]["name"]))
        assert _comparable(again) == _comparable(stored)
    finally:
        server.request("DELETE", _path(crd, first, obj["metadata"]["name"]))


KINDS = [
    "TerraformCluster",
    "TerraformMachinePool",
    "TerraformMachine",
    "TerraformClusterTemplate",
    "TerraformMachinePoolTemplate",
    "TerraformMachineTemplate",
    "TerraformClusterIdentity",
    "TerraformPlan",
    "TerraformPolicy",
]
_STRATEGIES: dict[tuple[str, str], Any] = {}


def _objects(kind: str, version: str) -> Any:
    if (kind, version) not in _STRATEGIES:
        _STRATEGIES[kind, version] = crd_object(CRDS[kind], version)
    return _STRATEGIES[kind, version]


EXAMPLES = settings(
    max_examples=12,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@pytest.mark.parametrize("kind", KINDS)
@EXAMPLES
@given(data=st.data())
def test_v1alpha1_to_v1beta1_and_back(server: ApiServer, kind: str, data: Any) -> None:
    _round_trip(server, kind, data.draw(_objects(kind, "v1alpha1")), "v1alpha1", "v1beta1")


@pytest.mark.parametrize("kind", KINDS)
@EXAMPLES
@given(data=st.data())
def test_v1beta1_to_v1alpha1_and_back(server: ApiServer, kind: str, data: Any) -> None:
    _round_trip(server, kind, data.draw(_objects(kind, "v1beta1")), "v1beta1", "v1alpha1")


def test_credentials_ref_reads_as_an_identity_ref_and_back(server: ApiServer) -> None:
    """The one field v1beta1 has not: read as v1beta1 it is the identityRef it always
    meant, and the annotation keeps it for a read as v1alpha1."""
    crd = CRDS["TerraformCluster"]
    old = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "TerraformCluster",
        "metadata": {"name": "creds"},
        "spec": {
            "source": {"image": "r.example/m:1"},
            "credentialsRef": {"name": "team-creds"},
            "jobs": {"image": "captf:dev"},
        },
    }
    server.request("POST", _path(crd, "v1alpha1"), old)
    new = server.request("GET", _path(crd, "v1beta1", "creds"))
    assert new["spec"]["identityRef"] == {"kind": "Secret", "name": "team-creds"}
    assert "credentialsRef" not in new["spec"]
    assert ANN_CONVERSION_DATA in new["metadata"]["annotations"]
    again = server.request("GET", _path(crd, "v1alpha1", "creds"))
    assert again["spec"]["credentialsRef"] == {"name": "team-creds"}
    assert "identityRef" not in again["spec"]
    assert "annotations" not in again["metadata"]
