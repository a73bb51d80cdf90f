"""TerraformClusterIdentity on the real API server, with the controller watching every
namespace: team-a's object runs with an identity that allows only team-a (its Job gets
the copied Secret as environment and files), team-b's does not (IdentityAllowed False,
NamespaceNotAllowed, no Job, no copy); taking team-a off the list deletes its copy and
starts no new Job; a label selector lets team-b in; an identity in use is held by its
finalizer; no value of the identity's Secret reaches a status or an Event."""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from functools import partial

import anyio
import orjson
import pytest

from controller.core.basics.names import API_VERSION, CLUSTER, IDENTITY
from controller.io.main import serve
from runtime.clock import SteppedClock
from runtime.envtest import ApiServer, RequestFailed
from runtime.jsonobj import Json
from tests.kube.harness import (
    MERGE,
    Kube,
    condition_is,
    controller_args,
    eventually,
    next_is,
    nth_job,
    owner_reference,
)

pytestmark = pytest.mark.kube
VALUE = "s3cr3t-identity-value"
IDENTITIES = f"/apis/{API_VERSION}/terraformclusteridentities"
MODULE = {"main.tf": 'variable "size" {}\nresource "terraform_data" "x" { input = var.size }\n'}


@dataclass
class Teams:
    server: ApiServer
    a: Kube
    b: Kube
    home: str  # the identity's Secret's namespace
    identity: str

    async def patch_identity(self, spec: Json) -> Json:
        path = f"{IDENTITIES}/{self.identity}"
        return await self.a.call("PATCH", path, {"spec": spec}, MERGE)

    async def get_identity(self) -> Json:
        return await self.a.call("GET", f"{IDENTITIES}/{self.identity}")


async def _namespace(
    kube_server: ApiServer, stem: str, labels: dict[str, str] | None = None
) -> str:
    name = f"{stem}-{uuid.uuid4().hex[:8]}"
    body = {"metadata": {"name": name, "labels": labels or {}}}
    await Kube(kube_server, name).call("POST", "/api/v1/namespaces", body)
    return name


async def _cluster(kube: Kube, identity: str) -> Json:
    """TerraformCluster c1 naming `identity`, its module and its Cluster API Cluster."""
    await kube.call(
        "POST",
        f"/api/v1/namespaces/{kube.ns}/configmaps",
        {"metadata": {"name": "c1-module"}, "data": MODULE},
    )
    owner = await kube.capi_cluster("c1")
    body = {
        "apiVersion": API_VERSION,
        "kind": CLUSTER,
        "metadata": {"name": "c1", "ownerReferences": [owner_reference(owner)]},
        "spec": {
            "source": {"configMapRef": {"name": "c1-module"}},
            "variables": {"size": 1},
            "identityRef": {"kind": IDENTITY, "name": identity},
            "jobs": {"image": "captf:dev"},
        },
    }
    return await kube.call("POST", kube.captf_path("terraformclusters"), body)


@pytest.fixture
async def teams(apiserver: ApiServer) -> Teams:
    home = await _namespace(apiserver, "idhome")
    team_a = await _namespace(apiserver, "team-a")
    team_b = await _namespace(apiserver, "team-b", {"team": "b"})
    a, b = Kube(apiserver, team_a), Kube(apiserver, team_b)
    name = f"aws-{uuid.uuid4().hex[:8]}"
    secret = {"metadata": {"name": "aws"}, "stringData": {"TOKEN": VALUE, "REGION": "eu-1"}}
    await a.call("POST", f"/api/v1/namespaces/{home}/secrets", secret)
    identity = {
        "apiVersion": API_VERSION,
        "kind": IDENTITY,
        "metadata": {"name": name},
        "spec": {
            "secretRef": {"namespace": home, "name": "aws"},
            "allowedNamespaces": {"list": [team_a]},
            "requiredKeys": ["TOKEN"],
        },
    }
    await a.call("POST", IDENTITIES, identity)
    await _cluster(a, name)
    await _cluster(b, name)
    return Teams(apiserver, a, b, home, name)


@contextlib.asynccontextmanager
async def everywhere(server: ApiServer, home: str, clock: SteppedClock) -> AsyncIterator[None]:
    """The controller watching every namespace (its Leases in `home`), until the block ends."""
    started = anyio.Event()
    # Every namespace is every earlier test's too: their objects (drift checks are on by
    # default) may hold every run slot of a controller with the default ten, and this
    # test's clock never lets their Jobs end. Slots enough for all of them.
    config = replace(controller_args(server, home), namespace=None, max_concurrent_runs=1000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(serve, config, started, clock))
        with anyio.fail_after(30):
            await started.wait()
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


async def _mirror(kube: Kube, identity: str) -> Json | None:
    try:
        return await kube.secret(f"captf-creds-{identity}")
    except RequestFailed as err:
        if err.status != 404:
            raise
        return None


async def test_an_identity_reaches_only_the_namespaces_it_allows(teams: Teams) -> None:
    a, b, name = teams.a, teams.b, teams.identity
    clock = SteppedClock()
    async with everywhere(teams.server, a.ns, clock):
        # team-a: the copy, then the Job that gets it as environment and as files.
        job = await nth_job(a, 1)
        pod = job["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert container["envFrom"] == [{"secretRef": {"name": f"captf-creds-{name}"}}]
        [volume] = [v for v in pod["volumes"] if v["name"] == "credentials"]
        assert volume["secret"] == {"secretName": f"captf-creds-{name}", "defaultMode": 0o440}
        [mount] = [m for m in container["volumeMounts"] if m["name"] == "credentials"]
        assert mount["mountPath"] == "/var/run/captf/credentials"
        mirror = await _mirror(a, name)
        assert mirror is not None
        assert base64.b64decode(mirror["data"]["TOKEN"]).decode() == VALUE
        assert not mirror["metadata"].get("ownerReferences")
        await condition_is(a, "IdentityAllowed", "True", "IdentityAllowed")

        # team-b: refused, no Job, no copy.
        cond = await condition_is(b, "IdentityAllowed", "False", "NamespaceNotAllowed")
        assert b.ns in cond["message"]
        await next_is(b, "CredentialsNotReady")
        assert await b.jobs("") == []
        assert await _mirror(b, name) is None

        async def status_lists_team_a() -> Json | None:
            found = await teams.get_identity()
            return found if (found.get("status") or {}).get("namespaces") == [a.ns] else None

        held = await eventually(status_lists_team_a, what="the identity's status")
        assert "captf.io/identity-in-use" in held["metadata"]["finalizers"]
        ready = [c for c in held["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"

        # Revoked: the copy goes, the condition says why, the running Job is left alone
        # and no new one starts once it has finished.
        await teams.patch_identity({"allowedNamespaces": {"list": []}})

        async def copy_gone() -> bool:
            return await _mirror(a, name) is None

        await eventually(copy_gone, what="team-a's copy deleted")
        await condition_is(a, "IdentityAllowed", "False", "NamespaceNotAllowed")
        assert [j["metadata"]["name"] for j in await a.jobs("")] == [job["metadata"]["name"]]
        await a.finish(job, "failed", at=clock.now())
        await next_is(a, "CredentialsNotReady")
        await clock.advance(3600)
        await next_is(a, "CredentialsNotReady")
        assert len(await a.jobs("")) == 1

        # A selector over the Namespaces' labels lets team-b in (its label team=b).
        await teams.patch_identity(
            {"allowedNamespaces": {"selector": {"matchLabels": {"team": "b"}}}}
        )
        b_job = await nth_job(b, 1)
        assert b_job["spec"]["template"]["spec"]["containers"][0]["envFrom"] == [
            {"secretRef": {"name": f"captf-creds-{name}"}}
        ]
        await condition_is(b, "IdentityAllowed", "True")
        # The label removed: team-b loses it again.
        await b.call(
            "PATCH", f"/api/v1/namespaces/{b.ns}", {"metadata": {"labels": {"team": None}}}, MERGE
        )
        await condition_is(b, "IdentityAllowed", "False", "NamespaceNotAllowed")

        async def b_copy_gone() -> bool:
            return await _mirror(b, name) is None

        await eventually(b_copy_gone, what="team-b's copy deleted")

        # An identity in use cannot go: its finalizer holds it.
        await a.call("DELETE", f"{IDENTITIES}/{name}")
        still = await teams.get_identity()
        assert still["metadata"].get("deletionTimestamp")
        assert "captf.io/identity-in-use" in still["metadata"]["finalizers"]

        # No value of the identity's Secret in any status or Event.
        encoded = base64.b64encode(VALUE.encode()).decode()
        for kube in (a, b):
            seen = orjson.dumps([await kube.cluster(), await kube.events()]).decode()
            assert VALUE not in seen
            assert encoded not in seen
        assert VALUE not in orjson.dumps(still).decode()
