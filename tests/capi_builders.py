"""Cluster API objects as the API server returns them (cluster.x-k8s.io/v1beta2), and
CAPTF objects owned by them, for tests of the module contract's wiring.

The snapshot holds the Cluster API objects in `related` under ObjectRef(kind, name);
`snap_of` puts them there beside what `snapshot.build` sorts."""

from __future__ import annotations

import base64
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import orjson

from controller.core.basics.names import ANN_INPUTS_HASH, LABEL_KIND, LABEL_NAME, state_secret_name
from controller.core.decide import reads, snapshot
from controller.core.decide.snapshot import Snapshot
from controller.core.spec.refs import ObjectRef
from runtime.jsonobj import Json
from tests.builders import NS, captf, kind_of

CAPI = "cluster.x-k8s.io/v1beta2"


def _meta(name: str, **extra: Any) -> Json:
    return {"name": name, "namespace": NS, "uid": f"uid-capi-{name}", **extra}


def cluster(
    name: str = "cl",
    *,
    infra: str = "c1",
    endpoint: Json | None = None,
    initialized: bool = False,
    network: Json | None = None,
    version: str | None = None,
) -> Json:
    spec: Json = {
        "infrastructureRef": {
            "apiGroup": "infrastructure.cluster.x-k8s.io",
            "kind": "TerraformCluster",
            "name": infra,
        }
    }
    if endpoint is not None:
        spec["controlPlaneEndpoint"] = endpoint
    if network is not None:
        spec["clusterNetwork"] = network
    if version is not None:
        spec["topology"] = {"version": version}
    status: Json = {"initialization": {"controlPlaneInitialized": initialized}}
    return {"apiVersion": CAPI, "kind": "Cluster", "metadata": _meta(name), "spec": spec} | {
        "status": status
    }


def machine(
    name: str = "m1",
    *,
    cluster_name: str = "cl",
    data_secret: str | None = "m1-bootstrap",
    version: str | None = "v1.31.0",
    failure_domain: str | None = None,
    control_plane: bool = False,
) -> Json:
    labels = {"cluster.x-k8s.io/cluster-name": cluster_name}
    if control_plane:
        labels["cluster.x-k8s.io/control-plane"] = ""
    spec: Json = {"clusterName": cluster_name, "bootstrap": {}}
    if data_secret is not None:
        spec["bootstrap"]["dataSecretName"] = data_secret
    if version is not None:
        spec["version"] = version
    if failure_domain is not None:
        spec["failureDomain"] = failure_domain
    return {"apiVersion": CAPI, "kind": "Machine", "metadata": _meta(name, labels=labels)} | {
        "spec": spec
    }


def machine_pool(
    name: str = "p1",
    *,
    cluster_name: str = "cl",
    replicas: int | None = 2,
    data_secret: str | None = "p1-bootstrap",
    annotations: dict[str, str] | None = None,
) -> Json:
    template: Json = {"spec": {"clusterName": cluster_name, "bootstrap": {}}}
    if data_secret is not None:
        template["spec"]["bootstrap"]["dataSecretName"] = data_secret
    spec: Json = {"clusterName": cluster_name, "template": template}
    if replicas is not None:
        spec["replicas"] = replicas
    meta = _meta(name, labels={"cluster.x-k8s.io/cluster-name": cluster_name})
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": CAPI, "kind": "MachinePool", "metadata": meta, "spec": spec}


def annotation_writers(
    annotation: str, writers: list[tuple[str, str]], other: str = "example.com/other"
) -> list[Json]:
    """managedFields in which each (manager, operation) of `writers` owns `annotation`, and
    one more entry owns only `other`."""
    entries = [(manager, operation, annotation) for manager, operation in writers]
    entries.append(("manager", "Update", other))
    return [
        {
            "manager": manager,
            "operation": operation,
            "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{key}": {}}}},
        }
        for manager, operation, key in entries
    ]


def bootstrap_secret(name: str = "m1-bootstrap", value: bytes | None = b"#cloud-config\n") -> Json:
    data = {} if value is None else {"value": base64.b64encode(value).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(name), "data": data}


def owned(kind: str, name: str, *, owner: Json, **build: Any) -> Json:
    """A CAPTF object owned by `owner` (a Cluster, Machine or MachinePool), labelled with
    its Cluster's name as Cluster API labels infrastructure it clones."""
    obj = captf(kind, name, **build)
    meta = obj["metadata"]
    meta["ownerReferences"] = [
        {
            "apiVersion": CAPI,
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    cluster_name = (owner["metadata"].get("labels") or {}).get("cluster.x-k8s.io/cluster-name")
    if owner["kind"] == "Cluster":
        cluster_name = owner["metadata"]["name"]
    meta["labels"] = {"cluster.x-k8s.io/cluster-name": cluster_name}
    return obj


def state_with_outputs(
    name: str, outputs: Json, *, inputs_hash: str | None = "h", kind: str | None = None
) -> Json:
    """A state Secret as the controller's cache keeps it: metadata and `outputs.json`."""
    kind = kind or kind_of(name)
    notes = {"captf.io/serial": "3"} | ({ANN_INPUTS_HASH: inputs_hash} if inputs_hash else {})
    data = {"outputs.json": base64.b64encode(orjson.dumps(outputs)).decode()}
    meta = _meta(state_secret_name(NS, kind, name), annotations=notes)
    meta["labels"] = {LABEL_KIND: kind, LABEL_NAME: name}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data}


def snap_of(obj: Json, others: list[Json], capi: list[Json]) -> Snapshot:
    """The snapshot of `obj` with the Cluster API objects in `related`: built with them, so
    the Secrets they name (the bootstrap data, the cluster's state) are kept."""
    snap = snapshot.build(obj, [*others, *capi])
    related = dict(snap.related)
    related |= {ObjectRef(o["kind"], o["metadata"]["name"]): reads.capi_read(o) for o in capi}
    return replace(snap, related=MappingProxyType(related))
