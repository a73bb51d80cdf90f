"""The workload's objects under the Cluster API owner model, read with the controller's
own reference readers: each CAPTF object has the owner it acts for, which names it back,
and a member finds its Cluster, its provisioned infrastructure and its bootstrap data."""

from __future__ import annotations

import random
import uuid
from typing import Any, cast

from controller.core.contract.roles import declares_contract
from controller.core.spec.refs import (
    ObjectRef,
    bootstrap_secret_of,
    capi_cluster_ref,
    infrastructure_ref,
    names_captf,
    owner_of,
    terraform_cluster_of,
)
from runtime.jsonobj import Json
from runtime.transport import Transport
from tests.chaos import report
from tests.chaos.workload import OWNER, PLURAL, Workload, module


class FakeTransport:
    """Records every request; a POST answers with the body and a fresh uid, as the API
    server does."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Json]] = []
        self.uids: dict[tuple[str, str], str] = {}

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Json:
        self.requests.append((method, path, body))
        if method != "POST":
            return {}
        uid = str(uuid.uuid4())
        self.uids[(path.rsplit("/", 1)[1], body["metadata"]["name"])] = uid
        answer: Json = body | {"metadata": body["metadata"] | {"uid": uid}}
        return answer

    def posted(self, plural: str) -> dict[str, Json]:
        return {
            body["metadata"]["name"]: body
            for method, path, body in self.requests
            if method == "POST" and path.endswith(f"/{plural}")
        }


async def created(objects: int = 10) -> tuple[Workload, FakeTransport]:
    fake = FakeTransport()
    workload = Workload(cast(Transport, fake), "ns", objects, random.Random(1))
    await workload.create()
    return workload, fake


async def test_each_object_acts_for_an_owner_that_names_it() -> None:
    workload, fake = await created()
    assert len(workload.members) == 10
    for m in workload.members:
        kind, plural = OWNER[m.kind]
        obj = fake.posted(PLURAL[m.kind])[m.name]
        owner = fake.posted(plural)[m.name]
        assert owner_of(obj) == ObjectRef(kind, m.name)
        [ref] = obj["metadata"]["ownerReferences"]
        assert ref["uid"] == fake.uids[(plural, m.name)]
        assert ref["controller"] is True
        assert names_captf(infrastructure_ref(owner), m.kind, m.name)
        assert "clusterRef" not in obj["spec"]
        assert "poolRef" not in obj["spec"]


async def test_members_find_their_cluster_and_bootstrap_data() -> None:
    workload, fake = await created()
    clusters = fake.posted("clusters")
    secrets = fake.posted("secrets")
    for m in (m for m in workload.members if not m.is_cluster):
        obj = fake.posted(PLURAL[m.kind])[m.name]
        ref = capi_cluster_ref(obj)
        assert ref is not None
        assert ref.name == m.family
        assert terraform_cluster_of(clusters[m.family]) == m.family
        owner = fake.posted(OWNER[m.kind][1])[m.name]
        assert "value" in secrets[bootstrap_secret_of(owner)]["stringData"]
        assert report.owner_of(obj) == report.Owner(m.name, m.family, False)


async def test_machines_depend_on_their_pool() -> None:
    workload, fake = await created()
    for m in (m for m in workload.members if m.kind == "TerraformMachine"):
        obj = fake.posted("terraformmachines")[m.name]
        assert obj["spec"]["dependsOn"] == [
            {"kind": "TerraformMachinePool", "name": f"{m.family}-pool"}
        ]


async def test_every_cluster_infrastructure_is_provisioned() -> None:
    workload, fake = await created()
    patched = {
        path.rsplit("/", 2)[1]
        for method, path, body in fake.requests
        if method == "PATCH"
        and path.endswith("/status")
        and body["status"]["initialization"]["infrastructureProvisioned"] is True
    }
    assert patched == {m.name for m in workload.members if m.is_cluster}


def test_the_module_is_its_own_root() -> None:
    # No contract: Ready means applied at the current inputs, what `converged` reads.
    assert not declares_contract({"main.tf": module(1)})


def test_the_module_reports_health_running() -> None:
    # Kept from before the controller ignored the readings of a module outside the
    # contract (without a `health` output it refreshed such an object without end), so
    # that chaos runs before and after compare.
    assert 'output "health"' in module(1)
    assert 'state = "running"' in module(1)


def test_a_cluster_is_its_own_family() -> None:
    obj = {"kind": "TerraformCluster", "metadata": {"name": "f00", "labels": {}}}
    assert report.owner_of(obj) == report.Owner("f00", "f00", True)
