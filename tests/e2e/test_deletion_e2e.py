"""End to end with real OpenTofu: a deletion held on a lost state runs no destroy, and a
restore of a backup ends the hold, after which the destroy removes what the module made
(docs/deletion.md). The infrastructure is a file the `local` provider manages."""

from __future__ import annotations

import asyncio

import pytest

from runtime.envtest.client import RequestFailed
from tests.e2e.system import System, ended
from tests.kube.harness import condition, state_of

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

FILE_MODULE = """\
variable "dir" {
  type = string
}
resource "local_file" "managed" {
  filename = "${var.dir}/managed.txt"
  content  = "hello"
}
"""
CLUSTERS = "terraformclusters"


async def test_a_restore_ends_a_held_deletion_and_the_destroy_follows(system: System) -> None:
    kube, managed = system.kube, system.infra / "managed.txt"
    await system.create_cluster("web", FILE_MODULE, {"dir": str(system.infra)})
    apply = await system.finished_job("web", "apply", 1)
    assert ended(apply) == "Complete", system.log(apply)
    assert managed.exists()

    # An operator's copy of the state, as a backup the restore can name; then the state
    # Secret is lost and the object deleted.
    state = await kube.secret(state_of(kube, "web"))
    serial = state["metadata"]["annotations"]["captf.io/serial"]
    backup = {
        "metadata": {
            "name": f"{state_of(kube, 'web')}-{serial}",
            "labels": {
                "captf.io/state-backup-of": "web",
                "captf.io/kind": "TerraformCluster",
                "captf.io/name": "web",
                "captf.io/managed-by": "captf",
            },
            "annotations": {"captf.io/serial": serial},
        },
        "data": state["data"],
    }
    await kube.call("POST", f"/api/v1/namespaces/{kube.ns}/secrets", backup)
    await kube.call("DELETE", f"/api/v1/namespaces/{kube.ns}/secrets/{state_of(kube, 'web')}")
    await kube.call("DELETE", kube.captf_path(CLUSTERS, "web"))

    async def held() -> dict[str, str] | None:
        cond = condition(await kube.get(CLUSTERS, "web"), "Waiting") or {}
        return cond if cond.get("reason") == "DeletionHeld" else None

    waiting = await system.until(held, "web's deletion held")
    assert f"captf.io/restore-serial={serial}" in waiting["message"]
    await asyncio.sleep(3)  # three controller minutes: still held, nothing destroyed
    assert await held()
    assert managed.exists()
    assert await kube.jobs("captf.io/op=destroy") == []

    await kube.annotate(CLUSTERS, "web", {"captf.io/restore-serial": serial})

    async def gone() -> bool:
        try:
            await kube.get(CLUSTERS, "web")
        except RequestFailed as err:
            return err.status == 404
        return False

    await system.until(gone, "web deleted after the restore and the destroy")
    restore = await system.finished_job("web", "restore", 1)
    assert ended(restore) == "Complete", system.log(restore)
    destroy = await system.finished_job("web", "destroy", 1)
    assert ended(destroy) == "Complete", system.log(destroy)
    assert not managed.exists()
