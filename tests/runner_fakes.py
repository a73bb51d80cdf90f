"""In-memory stand-ins for the runner's Kubernetes calls (unit and runner e2e tests).

`FakeKube` keeps Secrets and Jobs as the API server would for the calls the
runner makes: resourceVersions, AlreadyExists on create, Conflict on a stale
PUT, NotFound, label selectors of the `k=v[,k=v]` form."""

from __future__ import annotations

import base64
import copy
import gzip
import json

from runtime.errors import ApiError
from runtime.jsonobj import Json


def secret(
    name: str,
    data: dict[str, bytes],
    annotations: dict[str, str] | None = None,
    *,
    kind: str | None = "TerraformCluster",
    owner: str = "c",
) -> Json:
    """A Secret labelled (unless `kind` is None) for the object `kind`/`owner`, as the
    controller and the runner label the Secrets of an object (the runner reads no other)."""
    encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
    metadata: Json = {"name": name, "annotations": dict(annotations or {})}
    if kind is not None:
        metadata["labels"] = {"captf.io/kind": kind, "captf.io/name": owner}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": encoded}


def data_of(obj: Json, key: str) -> bytes:
    return base64.b64decode(obj["data"][key])


class FakeKube:
    def __init__(self) -> None:
        self.secrets: dict[str, Json] = {}
        self.writes: list[tuple[str, str]] = []  # (verb, name) of every Secret write
        self._rv = 0

    def _stamp(self, obj: Json) -> Json:
        self._rv += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        stored["metadata"].setdefault("uid", f"uid-{self._rv}")
        return stored

    def put(self, obj: Json) -> None:
        """Stores a Secret as if created earlier by someone else."""
        self.secrets[obj["metadata"]["name"]] = self._stamp(obj)

    async def get_secret(self, name: str) -> Json | None:
        found = self.secrets.get(name)
        return copy.deepcopy(found) if found is not None else None

    async def create_secret(self, body: Json) -> Json:
        name = body["metadata"]["name"]
        if name in self.secrets:
            raise ApiError(409, "AlreadyExists", f'secrets "{name}" already exists')
        self.secrets[name] = self._stamp(body)
        self.writes.append(("create", name))
        return copy.deepcopy(self.secrets[name])

    async def replace_secret(self, name: str, body: Json) -> Json:
        current = self.secrets.get(name)
        if current is None:
            raise ApiError(404, "NotFound", f'secrets "{name}" not found')
        wanted = body["metadata"].get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        stored = self._stamp(body)
        stored["metadata"]["uid"] = current["metadata"]["uid"]
        self.secrets[name] = stored
        self.writes.append(("replace", name))
        return copy.deepcopy(stored)

    async def delete_secret(self, name: str) -> None:
        self.secrets.pop(name, None)
        self.writes.append(("delete", name))

    async def list_secrets(self, label_selector: str) -> list[Json]:
        wanted = [term.partition("=")[::2] for term in label_selector.split(",")]
        return [
            copy.deepcopy(s)
            for s in self.secrets.values()
            if all((s["metadata"].get("labels") or {}).get(k) == v for k, v in wanted)
        ]


def stored_state(kube: FakeKube, name: str) -> bytes:
    """The state a state (or backup, or rescue) Secret of `kube` holds, in either layout
    (controller/runner/state_layout.py): its parts read from `kube`, unchecked."""
    secret = kube.secrets[name]
    if "terraform.tfstate" in secret.get("data", {}):
        return data_of(secret, "terraform.tfstate")
    manifest = json.loads(data_of(secret, "manifest.json"))
    parts = manifest["parts"]
    if parts:
        body = b"".join(data_of(kube.secrets[p["name"]], "part") for p in parts)
    else:
        body = data_of(secret, "state.gz")
    return gzip.decompress(body)
