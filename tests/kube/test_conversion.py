"""Round trips through the real API server's conversion path, objects of every kind drawn
from the CRD schemas (tests/crd_objects.py): written as one version with its status, read
as the other, written back whole as that one, read as the first again: the same object.
The API server calls the controller's conversion webhook (served on loopback from a
thread, with its certificate in the CRDs' caBundle) for every read and write in the
version an object is not stored in, and validates and prunes each result against the
version's schema, so a field lost or mangled on either way shows here.

An example the API server refuses (a CEL rule the strategies do not know of) is skipped:
it tests nothing of the conversion. They run on the session's API server, whose CRDs
convert through the session's webhook (tests/conftest.py)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from controller.core.basics.names import ANN_CONVERSION_DATA, GROUP
from runtime.envtest import ApiServer, RequestFailed
from runtime.envtest.crds import crd_documents
from runtime.jsonobj import Json
from tests.conversion_support import OUR_CRDS
from tests.crd_objects import crd_object

pytestmark = pytest.mark.kube
# What the API server sets and a write back changes: never part of the comparison.
# (generation stays: a write back that changed the spec would move it).
SERVER_SET = ("resourceVersion", "managedFields", "uid", "creationTimestamp")


@functools.cache
def _crds() -> dict[str, Json]:
    return {c["spec"]["names"]["kind"]: c for c in crd_documents(OUR_CRDS)}


@dataclass(frozen=True)
class At:
    """The API server, and the namespace the test's namespaced objects go to."""

    server: ApiServer
    ns: str

    def path(self, crd: Json, version: str, name: str = "", sub: str = "") -> str:
        plural = crd["spec"]["names"]["plural"]
        scope = f"namespaces/{self.ns}/" if crd["spec"]["scope"] == "Namespaced" else ""
        path = f"/apis/{GROUP}/{version}/{scope}{plural}"
        return "/".join(p for p in (path, name, sub) if p)

    def write_whole(self, crd: Json, version: str, obj: Json) -> Json:
        """`obj` written as `version`: its spec and metadata, then its status, each over
        the stored resourceVersion. Returns what the server then shows as `version`."""
        name = obj["metadata"]["name"]
        current = self.server.request("GET", self.path(crd, version, name))
        body = json.loads(json.dumps(obj))
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        written = self.server.request("PUT", self.path(crd, version, name), body)
        if "status" in obj and "status" in (crd["spec"]["versions"][-1].get("subresources") or {}):
            body["metadata"]["resourceVersion"] = written["metadata"]["resourceVersion"]
            self.server.request("PUT", self.path(crd, version, name, "status"), body)
        return self.server.request("GET", self.path(crd, version, name))

    def round_trip(self, kind: str, obj: Json, first: str, other: str) -> None:
        crd = _crds()[kind]
        name = obj["metadata"]["name"] = f"{obj['metadata']['name']}-{first}"[:63]
        try:
            self.server.request("POST", self.path(crd, first), obj)
        except RequestFailed as refused:
            assume(refused.status != 422)  # a rule the strategies do not draw around
            raise
        try:
            stored = self.write_whole(crd, first, obj)
            seen = self.server.request("GET", self.path(crd, other, name))
            assert seen["apiVersion"] == f"{GROUP}/{other}"
            self.write_whole(crd, other, seen)
            again = self.server.request("GET", self.path(crd, first, name))
            assert _comparable(again) == _comparable(stored)
        finally:
            self.server.request("DELETE", self.path(crd, first, name))


def _comparable(obj: Json) -> Json:
    meta = {k: v for k, v in obj["metadata"].items() if k not in SERVER_SET}
    return {**obj, "metadata": meta}


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


@functools.cache
def _objects(kind: str, version: str) -> Any:
    return crd_object(_crds()[kind], version)


EXAMPLES = settings(
    max_examples=8,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@pytest.mark.parametrize("kind", KINDS)
@EXAMPLES
@given(data=st.data())
def test_v1alpha1_to_v1beta1_and_back(
    apiserver: ApiServer, namespace: str, kind: str, data: Any
) -> None:
    obj = data.draw(_objects(kind, "v1alpha1"))
    At(apiserver, namespace).round_trip(kind, obj, "v1alpha1", "v1beta1")


@pytest.mark.parametrize("kind", KINDS)
@EXAMPLES
@given(data=st.data())
def test_v1beta1_to_v1alpha1_and_back(
    apiserver: ApiServer, namespace: str, kind: str, data: Any
) -> None:
    obj = data.draw(_objects(kind, "v1beta1"))
    At(apiserver, namespace).round_trip(kind, obj, "v1beta1", "v1alpha1")


def test_credentials_ref_reads_as_an_identity_ref_and_back(
    apiserver: ApiServer, namespace: str
) -> None:
    """The one field v1beta1 has not: read as v1beta1 it is the identityRef it always
    meant, and the annotation keeps it for a read as v1alpha1."""
    at, crd = At(apiserver, namespace), _crds()["TerraformCluster"]
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
    apiserver.request("POST", at.path(crd, "v1alpha1"), old)
    new = apiserver.request("GET", at.path(crd, "v1beta1", "creds"))
    assert new["spec"]["identityRef"] == {"kind": "Secret", "name": "team-creds"}
    assert "credentialsRef" not in new["spec"]
    assert ANN_CONVERSION_DATA in new["metadata"]["annotations"]
    again = apiserver.request("GET", at.path(crd, "v1alpha1", "creds"))
    assert again["spec"]["credentialsRef"] == {"name": "team-creds"}
    assert "identityRef" not in again["spec"]
    assert "annotations" not in again["metadata"]
