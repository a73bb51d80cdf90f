"""Each CRD's v1beta1, written from its v1alpha1 and the declared changes: one schema to edit.

A CRD file of manifests/crds/ holds its v1alpha1 version as written by hand; below the
line MARKER this writes the rest: the v1beta1 version (the v1alpha1 one, renamed, made the
storage version, with controller/core/conversion/changes.py applied to its inputs spec)
and `spec.conversion`, the conversion webhook the controller serves (POST /convert behind
the captf-webhook Service, its caBundle injected by cert-manager as for the admission
webhooks). Above the line it keeps the text as written and makes four edits, each
idempotent: Cluster API's contract label names both versions (the last is the one Cluster
API reads), v1alpha1 is no longer stored and is marked deprecated, and the CRD carries
cert-manager's inject-ca-from annotation.

A field added to a v1alpha1 schema therefore reaches v1beta1 at the next `make chart`, and
tests/unit/dev/test_crd_versions.py fails until then. A CRD with no v1alpha1 version (a
kind born at v1beta1) is left as it is written. `--check` only compares."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import yaml

from controller.core.basics.names import OLD_VERSION, VERSION
from controller.core.conversion.changes import CHANGES, SchemaMismatch
from controller.core.conversion.convert import TEMPLATE_OF
from controller.dev.generated import run_generator
from runtime.jsonobj import Json

ROOT = Path(__file__).resolve().parents[2]
CRDS = Path("manifests/crds")
MARKER = (
    f"    # {VERSION}: written by `make chart` (controller/dev/crd_versions.py) from {OLD_VERSION}"
    " above and\n    # controller/core/conversion/changes.py; do not edit below this line.\n"
)
CONTRACT_LABEL = "cluster.x-k8s.io/v1beta2"
INJECT_CA = "cert-manager.io/inject-ca-from: captf-system/captf-webhook-cert"
DEPRECATION = (
    f"infrastructure.cluster.x-k8s.io/{OLD_VERSION} is deprecated: use {VERSION}"
    " (docs/upgrading.md)"
)
CONVERSION: Json = {
    "strategy": "Webhook",
    "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {"name": "captf-webhook", "namespace": "captf-system", "path": "/convert"}
        },
    },
}


class CrdVersionsError(ValueError):
    """A CRD file cannot be followed: its text or schema is not what the edits expect."""


def generated(text: str, path: str = "") -> str:
    """The whole file for the hand-written `text` (which may hold an earlier generated part)."""
    head = text.split(MARKER, 1)[0].rstrip("\n") + "\n"
    crd = _crd(head, path)
    versions = [v["name"] for v in crd["spec"]["versions"]]
    if OLD_VERSION not in versions:
        return text
    if versions != [OLD_VERSION]:
        raise CrdVersionsError(f"{path}: above the marker, expected {OLD_VERSION} alone")
    head = _edited(head, crd, path)
    newer = _newer(_crd(head, path), path)
    body = _dump([newer], indent=4)
    conversion = _dump({"conversion": CONVERSION}, indent=2)
    return head + MARKER + body + conversion


def _crd(text: str, path: str) -> Json:
    docs = [d for d in yaml.safe_load_all(text) if d]
    if len(docs) != 1 or docs[0].get("kind") != "CustomResourceDefinition":
        raise CrdVersionsError(f"{path}: expected one CustomResourceDefinition")
    crd: Json = docs[0]
    return crd


def _newer(crd: Json, path: str) -> Json:
    version = copy.deepcopy(crd["spec"]["versions"][0])
    for key in ("deprecated", "deprecationWarning"):
        version.pop(key, None)
    version.update(name=VERSION, served=True, storage=True)
    kind = crd["spec"]["names"]["kind"]
    of = TEMPLATE_OF.get(kind, kind)
    root = version["schema"]["openAPIV3Schema"]
    for change in CHANGES:
        if of not in change.kinds:
            continue
        spec = root["properties"]["spec"]
        if kind in TEMPLATE_OF:
            spec = spec["properties"]["template"]["properties"]["spec"]
        try:
            change.schema(of, spec)
        except SchemaMismatch as mismatch:
            raise CrdVersionsError(f"{path}: {mismatch}") from None
        if change.name in json.dumps(spec):
            raise CrdVersionsError(f"{path}: {VERSION} still mentions {change.name}")
    # Key order as written above the marker: name first, then the rest.
    return {"name": version.pop("name"), **version}


def _edited(head: str, crd: Json, path: str) -> str:
    lines = head.split("\n")
    _replace(
        lines, f"    {CONTRACT_LABEL}: {OLD_VERSION}", f"    {CONTRACT_LABEL}: {_label()}", path
    )
    _replace(
        lines,
        "      storage: true",
        "      storage: false\n      deprecated: true\n"
        f"      deprecationWarning: {json.dumps(DEPRECATION)}",
        path,
    )
    if f"    {INJECT_CA}" not in lines:
        at = _index(lines, "  annotations:")
        if at is None:
            at = _index(lines, "  labels:", path)
            lines[at:at] = ["  annotations:", f"    {INJECT_CA}"]
        else:
            lines.insert(at + 1, f"    {INJECT_CA}")
    return "\n".join(lines)


def _label() -> str:
    return f"{OLD_VERSION}_{VERSION}"


def _replace(lines: list[str], old: str, new: str, path: str) -> None:
    """`old` becomes `new` (one line or several), unless `new` is there already."""
    first = new.split("\n")[0]
    if lines.count(first) == 1 and lines.count(old) == 0:
        return
    if lines.count(old) != 1:
        raise CrdVersionsError(f"{path}: expected one line {old.strip()!r}")
    at = lines.index(old)
    lines[at : at + 1] = new.split("\n")


def _index(lines: list[str], line: str, path: str | None = None) -> int | None:
    if lines.count(line) == 1:
        return lines.index(line)
    if path is None:
        return None
    raise CrdVersionsError(f"{path}: expected one line {line.strip()!r}")


def _dump(value: object, *, indent: int) -> str:
    text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=100)
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in text.splitlines(True))


def files(root: Path = ROOT) -> dict[Path, str]:
    """Each CRD file as it should read, by path under the repository."""
    return {
        path.relative_to(root): generated(path.read_text(), str(path.relative_to(root)))
        for path in sorted((root / CRDS).glob("*.yaml"))
    }


def differences(root: Path = ROOT) -> list[str]:
    return [str(p) for p, text in files(root).items() if (root / p).read_text() != text]


def write(root: Path = ROOT) -> None:
    for path, text in files(root).items():
        if (root / path).read_text() != text:
            (root / path).write_text(text)


def run(args: argparse.Namespace) -> int:
    return run_generator(
        args,
        target=CRDS,
        differences=differences,
        write=write,
        error=CrdVersionsError,
        verb="captf dev crds",
    )
