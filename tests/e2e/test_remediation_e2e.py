"""Remediation through Cluster API's own MachineHealthCheck (issue 30, item 4), end to end:
Cluster API's manager, the CAPTF controller, real OpenTofu, stand-in kubelets.

A MachineDeployment of one Machine whose module (written to the public contract) reads
its `health` output from a file beside the instance, which the test writes, as a cloud
API would report a stopped instance. A MachineHealthCheck selects the deployment's
Machines, with node checks that a stand-in Node, Ready and beating, never fails.

1. With `cluster.x-k8s.io/skip-remediation` on the Machine, three readings of `stopped`
   mark it `cluster.x-k8s.io/remediate-machine` (RemediationRequested) and the Machine
   stays; a reading of `running` withdraws the mark (RemediationWithdrawn).
2. Without it, one reading of `terminated` marks it again, at once (no threshold to wait
   for): the MachineHealthCheck finds the Machine unhealthy by the mark, the MachineSet
   deletes it and makes a new one, the new TerraformMachine comes up Ready and watched,
   and the old one's destroy Job removes its instance and its state before Cluster API
   lets the old Machine go.

Every wait is on a condition, with deadlines far above what the flow needs."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from controller.core.basics.names import MACHINE, state_secret_name
from controller.dev.clusterapi import ClusterApi
from controller.dev.workload import NodeJoiner
from controller.io.api import CAPI_OBJECTS
from runtime.cache import Informer, Selection
from runtime.clock import LoopClock
from runtime.jsonobj import Json
from tests.e2e.capi_objects import CAPI, MODULES, CapiObjects, condition, phase_of
from tests.e2e.system import WAIT, Seen, System, ended
from tests.e2e.test_clusterapi_e2e import CLUSTER, WORKERS, jobs_of, provisioned_cluster
from tests.e2e.test_stand_in_nodes_e2e import _externally_managed_control_plane
from tests.kube.harness import events_of

pytestmark = [pytest.mark.kube, pytest.mark.capi, pytest.mark.e2e]

REMEDIATE = "cluster.x-k8s.io/remediate-machine"
REQUESTED_BY = "captf.io/remediation-requested"
SKIP = "cluster.x-k8s.io/skip-remediation"
DEPLOYMENT_LABEL = "cluster.x-k8s.io/deployment-name"
MODULE = "watched-module"
# Generous: each reading is a refresh Job running OpenTofu on shared cores.
LONG = 6 * WAIT

# The example machine module with a file for an instance and a health the "cloud" reports:
# `<dir>/<machine>.health` when there, else running. A refresh re-reads it.
WATCHED = """\
variable "health_dir" {
  type = string
}

resource "local_file" "instance" {
  filename = "${var.health_dir}/${var.machine_name}.instance"
  content  = var.machine_name
}

locals {
  health_file = "${var.health_dir}/${var.machine_name}.health"
  state       = fileexists(local.health_file) ? trimspace(file(local.health_file)) : "running"
}

output "provider_id" {
  value = "captf://${var.captf_cluster.name}/${var.machine_name}"
}

output "addresses" {
  value = [{ type = "InternalIP", address = var.address }]
}

output "failure_domain" {
  value = var.failure_domain
}

output "interruptible" {
  value = false
}

output "health" {
  value = {
    state   = local.state
    healthy = local.state == "running"
    message = "the cloud reports ${local.state}"
    reasons = []
  }
}
"""


def machine_health_check() -> Json:
    """The recipe of docs/clusterapi.md: the deployment's Machines; a Node that never
    registers within 10 min, or that is not Ready for 5 min, is unhealthy too; the mark
    alone needs none of that. Remediation whatever the number unhealthy."""
    return {
        "apiVersion": CAPI,
        "kind": "MachineHealthCheck",
        "metadata": {"name": f"{WORKERS}-health"},
        "spec": {
            "clusterName": CLUSTER,
            "selector": {"matchLabels": {DEPLOYMENT_LABEL: WORKERS}},
            "checks": {
                "nodeStartupTimeoutSeconds": 600,
                "unhealthyNodeConditions": [
                    {"type": "Ready", "status": "Unknown", "timeoutSeconds": 300},
                    {"type": "Ready", "status": "False", "timeoutSeconds": 300},
                ],
            },
            "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": "100%"}},
        },
    }


async def watched_workers(objects: CapiObjects, health_dir: Path) -> None:
    """The module, a template that re-reads health every minute (a second at the e2e
    time scale), a MachineDeployment of one and its MachineHealthCheck."""
    variables = (MODULES / "machine" / "variables.tf").read_text()
    await objects.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": MODULE},
            "data": {"main.tf": WATCHED, "variables.tf": variables},
        }
    )
    await objects.machine_template(
        WORKERS,
        cluster=CLUSTER,
        module=MODULE,
        health={"interval": "1m"},
        variables={"health_dir": str(health_dir)},
    )
    bootstrap = await objects.bootstrap_secret(f"{CLUSTER}-bootstrap")
    await objects.machine_deployment(
        WORKERS, cluster=CLUSTER, template=WORKERS, replicas=1, bootstrap=bootstrap
    )
    await objects.call(
        "POST",
        f"/apis/{CAPI}/namespaces/{objects.ns}/machinehealthchecks",
        machine_health_check(),
    )


def notes_of(obj: Json | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def is_true(obj: Json | None, kind: str) -> bool:
    return (condition(obj, kind) or {}).get("status") == "True"


async def events_for(system: System, reason: str, name: str) -> list[Json]:
    found = await events_of(system.kube, reason)
    return [e for e in found if e["involvedObject"]["name"] == name]


async def test_a_machine_read_stopped_is_marked_and_replaced_by_its_machinehealthcheck(
    capi_cluster: ClusterApi, system: System, tmp_path: Path
) -> None:
    objects = await provisioned_cluster(system)
    await _externally_managed_control_plane(system)
    health_dir = tmp_path / "cloud"
    health_dir.mkdir()
    machines = Seen()
    informer = Informer(
        system.transport,
        CAPI_OBJECTS["Machine"],
        clock=LoopClock(),
        selection=Selection(namespace=system.kube.ns),
    )
    informer.add_handler(machines.record)
    async with informer, anyio.create_task_group() as tg:
        joiner = NodeJoiner(system.transport, say=lambda who, text: None, namespace=objects.ns)
        tg.start_soon(joiner.run)
        await watched_workers(objects, health_dir)
        [first] = await objects.machines_in_phase(CLUSTER, 1, "Running", within=LONG)
        old = first["metadata"]["name"]
        await withdrawn_while_skipped(system, objects, health_dir, old)
        await replaced(system, objects, health_dir, old, machines)
        tg.cancel_scope.cancel()


async def withdrawn_while_skipped(
    system: System, objects: CapiObjects, health_dir: Path, name: str
) -> None:
    """The mark is made and withdrawn by the readings alone; the skip annotation keeps the
    MachineHealthCheck off the Machine meanwhile."""
    await objects.patch("Machine", name, {"metadata": {"annotations": {SKIP: ""}}})
    watched = await objects.until(
        "TerraformMachine",
        name,
        lambda o: is_true(o, "HealthWatched"),
        "the TerraformMachine's health watched",
        within=LONG,
    )
    assert "read running" in (condition(watched, "HealthWatched") or {})["message"]
    (health_dir / f"{name}.health").write_text("stopped")
    marked = await objects.until(
        "Machine", name, lambda m: REMEDIATE in notes_of(m), "the Machine marked", within=LONG
    )
    assert marked is not None
    infra = await objects.get("TerraformMachine", name)
    assert infra is not None
    assert notes_of(marked)[REQUESTED_BY] == infra["metadata"]["uid"]
    [requested] = await events_for(system, "RemediationRequested", name)
    assert requested["type"] == "Warning"
    assert "3 readings in a row found the instance stopped" in requested["message"]
    (health_dir / f"{name}.health").unlink()
    cleared = await objects.until(
        "Machine",
        name,
        lambda m: REMEDIATE not in notes_of(m),
        "the mark withdrawn",
        within=LONG,
    )
    assert cleared is not None
    assert REQUESTED_BY not in notes_of(cleared)
    assert not cleared["metadata"].get("deletionTimestamp")  # skipped: not remediated
    [withdrawn] = await events_for(system, "RemediationWithdrawn", name)
    assert withdrawn["type"] == "Normal"


async def replaced(
    system: System, objects: CapiObjects, health_dir: Path, old: str, machines: Seen
) -> None:
    """Marked again, at the first reading of `terminated`, without the skip: Cluster API
    replaces the Machine and CAPTF destroys the old one's instance with its destroy Job."""
    await objects.patch("Machine", old, {"metadata": {"annotations": {SKIP: None}}})
    (health_dir / f"{old}.health").write_text("terminated")

    def replacement_running(found: list[Json]) -> bool:
        return [m["metadata"]["name"] != old and phase_of(m) == "Running" for m in found] == [True]

    [new] = await objects.until_listed(
        "Machine", replacement_running, "a new Machine Running", cluster=CLUSTER, within=LONG
    )
    assert await objects.get("Machine", old) is None
    assert await objects.get("TerraformMachine", old) is None
    # What Cluster API saw of the old Machine: our mark, then its MachineHealthCheck's
    # verdict on it, then the deletion that replaced it.
    seen = machines.of(old)
    assert any(REMEDIATE in notes_of(m) for m in seen)
    verdicts = [condition(m, "HealthCheckSucceeded") for m in seen]
    assert any(
        v is not None and v["status"] == "False" and v["reason"] == "HasRemediateAnnotation"
        for v in verdicts
    ), verdicts
    assert any(m["metadata"].get("deletionTimestamp") for m in seen)
    # One per reading that decided a mark: two marks (a pass on a cache that has not yet
    # seen the mark could ask once more, harmlessly). The second came at the one reading
    # of `terminated`, not after three.
    requested = await events_for(system, "RemediationRequested", old)
    assert len(requested) >= 2
    at_once = [e for e in requested if "found the instance terminated" in e["message"]]
    assert at_once, [e["message"] for e in requested]
    assert all(e["message"].startswith("a reading found") for e in at_once)
    # The old TerraformMachine went through our destroy Job: its instance and state gone.
    [destroy] = jobs_of(system, old, "destroy")
    assert ended(destroy) == "Complete", system.log(destroy)
    assert not (health_dir / f"{old}.instance").exists()
    state = state_secret_name(objects.ns, MACHINE, old)
    assert await objects.get("Secret", state) is None
    # The new Machine's TerraformMachine is Ready, its instance there, its health watched.
    name = new["metadata"]["name"]
    infra = await objects.until(
        "TerraformMachine",
        name,
        lambda o: is_true(o, "Ready") and is_true(o, "HealthWatched"),
        "the new TerraformMachine Ready and watched",
        within=LONG,
    )
    assert infra is not None
    assert (health_dir / f"{name}.instance").exists()
    assert REMEDIATE not in notes_of(new)
