"""Render a kustomization, the subset manifests/ uses, without kubectl.

`make run` and the tests install the controller the way a user does (`kubectl apply
-k manifests/`), and this machine has no kubectl. Supported fields:

- `resources`: YAML files, or directories holding a kustomization.yaml, in order;
- `namespace`: set on every namespaced object (cluster-scoped kinds keep none; the
  subjects of role bindings are left as written);
- `images`: `name` with `newName`, `newTag` and/or `digest`, applied to every
  container and init container whose image repository is `name`;
- `commonLabels`: added to every object's labels, and to the selectors and pod
  templates of workloads, as kustomize does.

Any other field is refused rather than ignored, so a kustomization that outgrows
this renderer says so. Objects come out in the order of `resources` (kustomize
sorts by kind unless told `--reorder none`); manifests/ lists them in apply order."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

from runtime.jsonobj import Json

KUSTOMIZATION = "kustomization.yaml"
SUPPORTED = {"apiVersion", "kind", "resources", "namespace", "images", "commonLabels"}
# Kinds without a namespace, among those an install holds.
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "PriorityClass",
    "StorageClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
}
WORKLOADS = {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"}


class KustomizeError(Exception):
    """The kustomization cannot be rendered here; says which file and why."""


def render(directory: Path) -> list[Json]:
    """The objects `kubectl kustomize <directory>` would print, as dicts."""
    path = directory / KUSTOMIZATION
    spec = _load_one(path)
    unknown = set(spec) - SUPPORTED
    if unknown:
        raise KustomizeError(f"{path}: not supported here: {', '.join(sorted(unknown))}")
    objects = [obj for entry in spec.get("resources") or [] for obj in _resource(directory, entry)]
    for obj in objects:
        if spec.get("namespace") and obj["kind"] not in CLUSTER_SCOPED:
            obj.setdefault("metadata", {})["namespace"] = spec["namespace"]
        for image in spec.get("images") or []:
            _set_image(obj, image)
        if spec.get("commonLabels"):
            _add_labels(obj, spec["commonLabels"])
    return objects


def _resource(directory: Path, entry: str) -> list[Json]:
    path = directory / entry
    if path.is_dir():
        return render(path)
    if not path.is_file():
        raise KustomizeError(f"{directory / KUSTOMIZATION}: resource {entry!r} not found")
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _load_one(path: Path) -> Json:
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as error:
        raise KustomizeError(f"{path}: {error.strerror}") from error
    if not isinstance(loaded, dict):
        raise KustomizeError(f"{path}: not a mapping")
    return loaded


# -- images -------------------------------------------------------------------------


def repository_of(image: str) -> str:
    """`registry:5000/team/captf:dev@sha256:...` -> `registry:5000/team/captf`."""
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last


def _tag_of(image: str) -> str:
    name = image.split("@", 1)[0]
    last = name.rpartition("/")[2]
    return last.split(":", 1)[1] if ":" in last else ""


def new_image(image: str, rule: Mapping[str, str]) -> str:
    """`image` rewritten by one `images` rule (the caller checked the name matches)."""
    repository = rule.get("newName") or repository_of(image)
    if rule.get("digest"):
        return f"{repository}@{rule['digest']}"
    tag = rule.get("newTag") or _tag_of(image)
    return f"{repository}:{tag}" if tag else repository


def _set_image(obj: Json, rule: Mapping[str, str]) -> None:
    for container in _containers(obj):
        image = container.get("image")
        if isinstance(image, str) and repository_of(image) == rule["name"]:
            container["image"] = new_image(image, rule)


def _containers(node: object) -> Iterator[Json]:
    """Every container and init container, wherever the kind keeps its pod spec."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (c for c in value if isinstance(c, dict))
            else:
                yield from _containers(value)
    elif isinstance(node, list):
        for item in node:
            yield from _containers(item)


# -- commonLabels --------------------------------------------------------------------


def _add_labels(obj: Json, labels: Mapping[str, str]) -> None:
    _merge(obj, ("metadata", "labels"), labels, create=True)
    kind, spec = obj["kind"], ("spec",)
    if kind in WORKLOADS:
        _merge(obj, (*spec, "selector", "matchLabels"), labels, create=True)
        _merge(obj, (*spec, "template", "metadata", "labels"), labels, create=True)
    elif kind == "Job":
        _merge(obj, (*spec, "template", "metadata", "labels"), labels, create=True)
    elif kind == "Service":
        _merge(obj, (*spec, "selector"), labels, create=True)
    elif kind == "PodDisruptionBudget":
        _merge(obj, (*spec, "selector", "matchLabels"), labels, create=False)


def _merge(obj: Json, path: tuple[str, ...], labels: Mapping[str, str], *, create: bool) -> None:
    """Add `labels` to the mapping at `path`; create the path only if `create`."""
    node = obj
    for key in path:
        if not isinstance(node.get(key), dict):
            if not create:
                return
            node[key] = {}
        node = node[key]
    node.update(labels)
