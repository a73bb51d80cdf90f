"""The objects of `captf bench fleet`: C Cluster API clusters, each a Cluster on a
TerraformCluster with its LocalControlPlane and workload kubeconfig, a MachineDeployment
of TerraformMachines cloned from a template running the bench's machine module
(controller/bench/fleet_module: every Job reads the instance for a set time), and a
MachinePool; all of them reading the cloud through one TerraformClusterIdentity, `fleet`.

The clusters and templates are made with their schedules off (`spec.health`,
`spec.drift`, `spec.membership` intervals 0): the bench measures a scale-up in quiet
slots first, then turns the schedules of every object it finds on (`SCHEDULES_ON`, a
merge patch that removes the intervals, so each takes its default) and holds the fleet.
A template is immutable, so the Machines of the second scale-up come up with their
schedules off as well: in both scale-ups the new Machines add no background of their
own, and what their changes wait behind is the fleet's."""

from __future__ import annotations

import argparse
import base64
import math
from typing import Any, Final

from controller.core.basics.names import (
    CAPI_GROUP,
    CAPI_VERSION,
    GROUP,
    IDENTITY,
    LABEL_CLUSTER_NAME,
    VERSION,
)
from controller.dev import controlplane, workload
from runtime.jsonobj import Json

NAMESPACE: Final = "default"
IDENTITY_NAME: Final = "fleet"
CREDENTIALS: Final = "fleet-credentials"
K8S_VERSION: Final = "v1.35.0"
POOL_REPLICAS: Final = 2
_OFF: Final = {"interval": "0s"}
# A merge patch that turns an object's schedules on: each interval back to its default.
SCHEDULES_ON: Final = {
    "spec": {"health": {"interval": None}, "drift": {"interval": None}},
}
POOL_SCHEDULES_ON: Final = {
    "spec": {"membership": {"interval": None}, "drift": {"interval": None}},
}
CLUSTER_SCHEDULES_ON: Final = {"spec": {"drift": {"interval": None}}}


def per_cluster(args: argparse.Namespace, index: int) -> int:
    """Machines of cluster `index`: N spread over C, the first ones one more."""
    machines, clusters = int(args.machines), int(args.clusters)
    return machines // clusters + (1 if index < machines % clusters else 0)


def scale_up_of(args: argparse.Namespace) -> int:
    """Machines each scale-up adds to each cluster: `--scale-up`, else a third of the
    fleet spread over the clusters (at least one each)."""
    if args.scale_up:
        return int(args.scale_up)
    return max(1, math.ceil(int(args.machines) / 3 / int(args.clusters)))


def cluster_name(index: int) -> str:
    return f"fleet-{index}"


def deployment_name(index: int) -> str:
    return f"{cluster_name(index)}-md"


def pool_name(index: int) -> str:
    return f"{cluster_name(index)}-mp"


def shared(kubeconfig: bytes, clusters: int) -> list[Json]:
    """What every cluster uses: the credentials, the identity naming them, the bootstrap
    data, and each cluster's workload kubeconfig (this API server)."""
    return [
        _secret(CREDENTIALS, {"FLEET_API_TOKEN": "not-a-real-token"}),
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": IDENTITY,
            "metadata": {"name": IDENTITY_NAME},
            "spec": {
                "secretRef": {"namespace": NAMESPACE, "name": CREDENTIALS},
                "allowedNamespaces": {"list": [NAMESPACE]},
            },
        },
        *(workload.kubeconfig_secret(cluster_name(i), kubeconfig) for i in range(clusters)),
        *(_bootstrap(cluster_name(i)) for i in range(clusters)),
    ]


def _bootstrap(cluster: str) -> Json:
    """What a bootstrap provider writes for each Machine; one per cluster here."""
    secret = _secret(f"{cluster}-bootstrap", {"value": "#cloud-config\n", "format": "cloud-config"})
    secret["metadata"]["labels"] = {LABEL_CLUSTER_NAME: cluster}
    secret["type"] = workload.SECRET_TYPE
    return secret


def cluster(index: int, images: dict[str, str], machines: int, read_seconds: float) -> list[Json]:
    """One cluster's objects, its MachineDeployment at `machines`."""
    name = cluster_name(index)
    source = {"imagePullPolicy": "IfNotPresent"}
    infra = {"apiGroup": GROUP, "kind": "TerraformCluster", "name": name}
    timing = {"read_seconds": read_seconds, "create_seconds": read_seconds}
    return [
        controlplane.control_plane(name),
        _capi(
            "Cluster",
            name,
            {
                "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}},
                "infrastructureRef": infra,
                "controlPlaneRef": controlplane.reference(name),
            },
        ),
        _infra(
            "TerraformCluster",
            name,
            {
                "source": {"image": images["cluster"], **source},
                "identityRef": {"kind": IDENTITY, "name": IDENTITY_NAME},
                "jobs": {"image": "captf:dev"},
                "drift": _OFF,
            },
        ),
        _infra(
            "TerraformMachineTemplate",
            deployment_name(index),
            {
                "template": {
                    "spec": {
                        "source": {"image": images["machine"], **source},
                        "variables": timing,
                        "jobs": {"image": "captf:dev"},
                        "health": _OFF,
                        "drift": _OFF,
                    }
                },
            },
        ),
        _capi(
            "MachineDeployment",
            deployment_name(index),
            {
                "clusterName": name,
                "replicas": machines,
                "template": {
                    "spec": _machine_spec(name, "TerraformMachineTemplate", deployment_name(index))
                },
            },
        ),
        _infra(
            "TerraformMachinePool",
            pool_name(index),
            {
                "source": {"image": images["machinepool"], **source},
                "jobs": {"image": "captf:dev"},
                "membership": _OFF,
                "drift": _OFF,
            },
        ),
        _capi(
            "MachinePool",
            pool_name(index),
            {
                "clusterName": name,
                "replicas": POOL_REPLICAS,
                "template": {"spec": _machine_spec(name, "TerraformMachinePool", pool_name(index))},
            },
        ),
    ]


def _machine_spec(cluster: str, kind: str, name: str) -> Json:
    return {
        "clusterName": cluster,
        "version": K8S_VERSION,
        "bootstrap": {"dataSecretName": f"{cluster}-bootstrap"},
        "infrastructureRef": {"apiGroup": GROUP, "kind": kind, "name": name},
    }


def _capi(kind: str, name: str, spec: Json) -> Json:
    return {
        "apiVersion": f"{CAPI_GROUP}/{CAPI_VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def _infra(kind: str, name: str, spec: Json) -> Json:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def _secret(name: str, values: dict[str, Any]) -> Json:
    data = {k: base64.b64encode(str(v).encode()).decode() for k, v in values.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data}
