"""The storage version migration against a scripted API: which requests it makes for a
CRD that still lists v1alpha1 as stored, and for one that does not, what it does on a
page boundary, a vanished object, a refusal and a transient failure. (Only a controller
of every namespace runs it: controller/io/main.py.) On the real API
server with the manifests' RBAC: tests/kube/test_storage_migration.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from controller.io import migration
from controller.io.api import STORED
from runtime.clock import SteppedClock
from runtime.errors import ApiError
from runtime.jsonobj import Json
from tests.paths import REPO

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
GROUP = "/apis/infrastructure.cluster.x-k8s.io/v1beta1"


def _crd(plural: str, stored: list[str], status: bool = True) -> Json:
    version: Json = {"name": "v1beta1", "storage": True}
    if status:
        version["subresources"] = {"status": {}}
    return {
        "metadata": {"name": f"{plural}.infrastructure.cluster.x-k8s.io"},
        "spec": {"versions": [{"name": "v1alpha1", "storage": False}, version]},
        "status": {"storedVersions": stored},
    }


class Scripted:
    """Answers from a table: CRDs by plural, pages of objects by collection path; records
    every request; raises the errors it is told to, once each."""

    def __init__(self, crds: dict[str, Json], pages: dict[str, list[list[str]]]) -> None:
        self.crds, self.pages = crds, pages
        self.requests: list[tuple[str, str, Any]] = []
        self.fail: dict[tuple[str, str], ApiError] = {}

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.requests.append((method, path, kwargs.get("body")))
        failure = self.fail.pop((method, path), None)
        if failure is not None:
            raise failure
        if method == "GET" and path.startswith(CRD_PATH):
            return self.crds[path.removeprefix(CRD_PATH).split(".")[0]]
        if method == "GET":
            pages = self.pages.get(path, [[]])
            at = int((kwargs.get("params") or {}).get("continue") or 0)
            names = pages[at]
            more = {"continue": str(at + 1)} if at + 1 < len(pages) else {}
            items = [
                {"metadata": dict(zip(("namespace", "name"), n.split("/"), strict=True))}
                for n in names
            ]
            return {"items": items, "metadata": more}
        return {}


def _patches(api: Scripted) -> list[tuple[str, Any]]:
    return [(path, body) for method, path, body in api.requests if method == "PATCH"]


def _all_current(**over: Json) -> dict[str, Json]:
    crds = {r.plural: _crd(r.plural, ["v1beta1"]) for r in STORED}
    return crds | over


async def test_nothing_is_written_when_every_crd_stores_one_version() -> None:
    api = Scripted(_all_current(), {})
    await migration.migrate_storage(api, SteppedClock())
    assert _patches(api) == []
    assert len(api.requests) == len(STORED)


async def test_every_object_is_rewritten_then_the_crd_trimmed() -> None:
    crds = _all_current(terraformmachines=_crd("terraformmachines", ["v1alpha1", "v1beta1"]))
    pages = {f"{GROUP}/terraformmachines": [["a/m1", "a/m2"], ["b/m3"]]}
    api = Scripted(crds, pages)
    await migration.migrate_storage(api, SteppedClock())
    assert _patches(api) == [
        (f"{GROUP}/namespaces/a/terraformmachines/m1/status", {}),
        (f"{GROUP}/namespaces/a/terraformmachines/m2/status", {}),
        (f"{GROUP}/namespaces/b/terraformmachines/m3/status", {}),
        (
            f"{CRD_PATH}terraformmachines.infrastructure.cluster.x-k8s.io/status",
            {"status": {"storedVersions": ["v1beta1"]}},
        ),
    ]


async def test_a_kind_without_status_is_rewritten_itself() -> None:
    plural = "terraformclustertemplates"
    crds = _all_current(**{plural: _crd(plural, ["v1alpha1", "v1beta1"], status=False)})
    api = Scripted(crds, {f"{GROUP}/{plural}": [["a/t1"]]})
    await migration.migrate_storage(api, SteppedClock())
    assert _patches(api)[0] == (f"{GROUP}/namespaces/a/{plural}/t1", {})


async def test_a_vanished_object_is_no_failure() -> None:
    crds = _all_current(terraformplans=_crd("terraformplans", ["v1alpha1", "v1beta1"]))
    api = Scripted(crds, {f"{GROUP}/terraformplans": [["a/p1", "a/p2"]]})
    api.fail[("PATCH", f"{GROUP}/namespaces/a/terraformplans/p1/status")] = ApiError(
        404, "NotFound", "gone"
    )
    await migration.migrate_storage(api, SteppedClock())
    assert _patches(api)[-1][1] == {"status": {"storedVersions": ["v1beta1"]}}


async def test_a_refusal_leaves_the_crd_and_a_transient_failure_retries_it() -> None:
    crds = _all_current(terraformclusters=_crd("terraformclusters", ["v1alpha1", "v1beta1"]))
    api = Scripted(crds, {f"{GROUP}/terraformclusters": [["a/c1"]]})
    trim = f"{CRD_PATH}terraformclusters.infrastructure.cluster.x-k8s.io/status"
    api.fail[("PATCH", trim)] = ApiError(503, "ServiceUnavailable", "busy")
    api.fail[("GET", f"{CRD_PATH}terraformplans.infrastructure.cluster.x-k8s.io")] = ApiError(
        403, "Forbidden", "no"
    )
    clock = SteppedClock()
    async with anyio.create_task_group() as tg:
        tg.start_soon(migration.migrate_storage, api, clock)
        await clock.advance(0)
        assert [p for p, _ in _patches(api)] == [
            f"{GROUP}/namespaces/a/terraformclusters/c1/status",
            trim,
        ]
        await clock.advance(migration.RETRY)
    # The second round: the rewrite again (harmless), then the trim.
    assert [p for p, _ in _patches(api)][2:] == [
        f"{GROUP}/namespaces/a/terraformclusters/c1/status",
        trim,
    ]
    plans = [
        p
        for m, p, _ in api.requests
        if m == "GET" and p.endswith("terraformplans.infrastructure.cluster.x-k8s.io")
    ]
    assert len(plans) == 1  # refused once: not asked again


@pytest.mark.parametrize("path", sorted((REPO / "manifests" / "crds").glob("*.yaml")))
def test_every_crd_of_the_group_is_migrated(path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    assert crd["spec"]["names"]["plural"] in {r.plural for r in STORED}
