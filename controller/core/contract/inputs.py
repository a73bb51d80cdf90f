"""The contract inputs of each role, computed from the Cluster API objects as plain dicts.

Only spec-derived values are rendered, and what is rendered is what is hashed: no uid
(`clusterctl move` re-creates objects with new ones), no generation (it moves when the
controller writes spec.providerID or the endpoint), no labels and no annotations but
the template an object was cloned from. So a moved or relabelled object renders the
same inputs and re-applies nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.core.contract.roles import CONTRACT_VERSION, Role, contract_of
from controller.core.contract.sizing import Autoscaling, autoscaling_of
from controller.core.contract.sources import (
    Bootstrap,
    cluster_network_of,
    dig,
    valid_endpoint,
)
from runtime.jsonobj import Json

CLONED_FROM_NAME = "cluster.x-k8s.io/cloned-from-name"
CONTROL_PLANE_LABEL = "cluster.x-k8s.io/control-plane"
# Written once on the TerraformCluster: `module` once the controller copied the module's
# endpoint output into its spec, so that copy is never fed back to the module.
ENDPOINT_SOURCE = "captf.io/endpoint-source"
MANAGED_BY_VALUE = "captf"
# CAPI's default when MachinePool.spec.replicas is unset.
DEFAULT_POOL_REPLICAS = 1


def _name(obj: Json) -> str:
    return str(dig(obj, "metadata", "name") or "")


def _namespace(obj: Json) -> str:
    return str(dig(obj, "metadata", "namespace") or "")


def tags(*, role: Role, obj: Json, cluster_name: str) -> dict[str, str]:
    """The fixed tag keys; every one is always present, the template "" when the object
    was not cloned from a template."""
    template = dig(obj, "metadata", "annotations", CLONED_FROM_NAME)
    return {
        "captf.io/cluster": cluster_name,
        "captf.io/namespace": _namespace(obj),
        "captf.io/kind": contract_of(role).kind,
        "captf.io/name": _name(obj),
        "captf.io/managed-by": MANAGED_BY_VALUE,
        "captf.io/template": str(template or ""),
    }


def common_inputs(*, role: Role, obj: Json, cluster: Json) -> Json:
    """The inputs every role receives, except captf_cluster_outputs (not the cluster's)."""
    cluster_name = _name(cluster)
    return {
        "captf_contract": CONTRACT_VERSION,
        "captf_cluster": {"name": cluster_name, "namespace": _namespace(cluster)},
        "captf_object": {
            "kind": contract_of(role).kind,
            "name": _name(obj),
            "namespace": _namespace(obj),
        },
        "captf_tags": tags(role=role, obj=obj, cluster_name=cluster_name),
    }


def cluster_exports(exports: Any) -> Any:
    """captf_cluster_outputs: the cluster module's `exports`, verbatim; null is {}."""
    return {} if exports is None else exports


def control_plane_endpoint(*, obj: Json, cluster: Json) -> Json | None:
    """The endpoint the module must use rather than create: the Cluster's, else our own
    spec's, when valid; never once the endpoint came from the module itself."""
    if dig(obj, "metadata", "annotations", ENDPOINT_SOURCE) == "module":
        return None
    return valid_endpoint(dig(cluster, "spec", "controlPlaneEndpoint")) or valid_endpoint(
        dig(obj, "spec", "controlPlaneEndpoint")
    )


def cluster_inputs(*, obj: Json, cluster: Json, previous: Mapping[str, Any] | None) -> Json:
    """The TerraformCluster's inputs. `previous` is the tfvars of the durable inputs
    Secret, or None: control_plane_initialized is latched through it, because status is
    not moved and a first render after a move must not turn it back to false."""
    initialized = dig(cluster, "status", "initialization", "controlPlaneInitialized") is True
    latched = (previous or {}).get("control_plane_initialized") is True
    return {
        **common_inputs(role=Role.CLUSTER, obj=obj, cluster=cluster),
        "control_plane_endpoint": control_plane_endpoint(obj=obj, cluster=cluster),
        "kubernetes_version": dig(cluster, "spec", "topology", "version") or None,
        "control_plane_initialized": initialized or latched,
        "cluster_network": cluster_network_of(cluster),
    }


def machine_inputs(
    *, obj: Json, machine: Json, cluster: Json, bootstrap: Bootstrap, exports: Any
) -> Json:
    """The TerraformMachine's inputs, for its owner Machine."""
    labels = dig(machine, "metadata", "labels") or {}
    return {
        **common_inputs(role=Role.MACHINE, obj=obj, cluster=cluster),
        "captf_cluster_outputs": cluster_exports(exports),
        "machine_name": _name(machine),
        "bootstrap_data": bootstrap.data,
        "bootstrap_format": bootstrap.format,
        "failure_domain": dig(machine, "spec", "failureDomain") or None,
        "kubernetes_version": dig(machine, "spec", "version") or None,
        "control_plane": CONTROL_PLANE_LABEL in labels,
    }


def pool_replicas(*, pool: Json, autoscaling: Autoscaling, observed: int | None) -> int:
    """The desired capacity rendered: the MachinePool's spec.replicas, whoever wrote it,
    unless the cloud sizes the group (contract/sizing.py); then the capacity last observed
    (the spec's before any). Within the autoscaler's bounds when it has valid ones."""
    wanted = dig(pool, "spec", "replicas")
    spec_replicas = DEFAULT_POOL_REPLICAS if wanted is None else int(wanted)
    if autoscaling.enabled and observed is not None:
        return autoscaling.clamp(observed)
    return autoscaling.clamp(spec_replicas)


def pool_inputs(
    *,
    obj: Json,
    pool: Json,
    cluster: Json,
    bootstrap: Bootstrap,
    exports: Any,
    cluster_failure_domains: Sequence[str],
    observed_replicas: int | None,
) -> Json:
    """The TerraformMachinePool's inputs, for its owner MachinePool.

    `cluster_failure_domains` are the names of the cluster state's failure_domains output
    (not of its status, which a move drops); `observed_replicas` is the group's desired
    capacity from the last refresh (TerraformMachinePool.status.replicas), or None."""
    autoscaling = autoscaling_of(pool)
    return {
        **common_inputs(role=Role.MACHINEPOOL, obj=obj, cluster=cluster),
        "captf_cluster_outputs": cluster_exports(exports),
        "machinepool_name": _name(pool),
        "replicas": pool_replicas(pool=pool, autoscaling=autoscaling, observed=observed_replicas),
        "bootstrap_data": bootstrap.data,
        "bootstrap_format": bootstrap.format,
        "failure_domains": list(dig(pool, "spec", "failureDomains") or []),
        "cluster_failure_domains": list(cluster_failure_domains),
        "kubernetes_version": dig(pool, "spec", "template", "spec", "version") or None,
        "node_labels": dict(dig(pool, "spec", "template", "metadata", "labels") or {}),
        "autoscaling": autoscaling.as_input(),
    }


def hashed_inputs(role: Role, inputs: Mapping[str, Any]) -> Json:
    """The inputs the re-apply hash covers: all of them, except a pool's replicas while
    the cloud sizes its group, so the cloud's own scaling never re-applies. Otherwise a
    change of spec.replicas (a user's, the cluster-autoscaler's) is an apply."""
    hashed = dict(inputs)
    if role is Role.MACHINEPOOL and dig(hashed, "autoscaling", "enabled") is True:
        hashed.pop("replicas", None)
    return hashed
