"""The Helm chart `charts/captf`, generated from `manifests/`: one source of truth.

The manifests are what `kubectl apply -k` installs and what the tests check; the
chart's templates are those same files with a few fields turned into values (the
namespace, replicas, image, log format, resources) and the monitoring objects behind
`monitoring.enabled`. Each substitution must match its manifest exactly once, so a
change to a manifest that the chart cannot follow fails here rather than drifting.

`captf dev chart` writes the chart; `--check` only compares, for CI and tests. Rendered
with its default values, the chart makes the objects of `manifests/` less the
Namespace (Helm's `--create-namespace` makes it); with `monitoring.enabled=true` also
those of `manifests/monitoring/`."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.core.basics.release import RELEASE
from controller.dev.generated import run_generator

ROOT = Path(__file__).resolve().parents[2]
CHART = Path("charts/captf")
NAMESPACE = "captf-system"
VERSION = RELEASE

# Literal template braces in a manifest (the PrometheusRule's `{{ $value }}`) are
# escaped so that Helm prints them as they are.
_BRACES = re.compile(r"\{\{|\}\}")


@dataclass(frozen=True)
class Sub:
    """`old` (a whole line, stripped of indentation) becomes `new`, with the indentation kept."""

    old: str
    new: str


@dataclass(frozen=True)
class Block:
    """The block under the line `key:` becomes one template line, indented under it."""

    key: str
    template: str


@dataclass(frozen=True)
class Template:
    source: str  # under manifests/
    target: str  # under the chart
    edits: tuple[Sub | Block, ...] = ()
    condition: str | None = None  # rendered only when this value is true


_NS = Sub(f"namespace: {NAMESPACE}", "namespace: {{ .Release.Namespace }}")
_MONITORING = ".Values.monitoring.enabled"
_INJECT_CA = Sub(
    f"cert-manager.io/inject-ca-from: {NAMESPACE}/captf-webhook-cert",
    "cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/captf-webhook-cert",
)

TEMPLATES = (
    Template("rbac.yaml", "templates/rbac.yaml", (_NS,)),
    Template("runner-rbac.yaml", "templates/runner-rbac.yaml"),
    Template("user-roles.yaml", "templates/user-roles.yaml"),
    Template(
        "deployment.yaml",
        "templates/deployment.yaml",
        (
            _NS,
            Sub("replicas: 2", "replicas: {{ .Values.replicas }}"),
            Sub(
                "image: captf:dev",
                'image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"',
            ),
            Sub("imagePullPolicy: IfNotPresent", "imagePullPolicy: {{ .Values.image.pullPolicy }}"),
            Sub("- --log-format=json", "- --log-format={{ .Values.logFormat }}"),
            # The runner image objects may use is the one the chart installs.
            Sub(
                "- --allowed-images=captf:dev",
                "- --allowed-images={{ .Values.image.repository }}:{{ .Values.image.tag }}",
            ),
            Sub(
                "- --module-image-mount=auto",
                "- --module-image-mount={{ .Values.moduleImageMount }}",
            ),
            Sub(
                "- --job-defaults={}",
                '- {{ printf "--job-defaults=%s" (toJson .Values.jobDefaults) | quote }}',
            ),
            Block("resources", "{{- toYaml .Values.resources | nindent 12 }}"),
        ),
    ),
    Template("pdb.yaml", "templates/pdb.yaml", (_NS,)),
    Template("webhook/service.yaml", "templates/webhook/service.yaml", (_NS,)),
    Template(
        "webhook/certificate.yaml",
        "templates/webhook/certificate.yaml",
        (
            _NS,
            Sub(
                f"- captf-webhook.{NAMESPACE}.svc",
                "- captf-webhook.{{ .Release.Namespace }}.svc",
            ),
            Sub(
                f"- captf-webhook.{NAMESPACE}.svc.cluster.local",
                "- captf-webhook.{{ .Release.Namespace }}.svc.cluster.local",
            ),
        ),
    ),
    Template("webhook/validating.yaml", "templates/webhook/validating.yaml", (_NS, _INJECT_CA)),
    Template("webhook/mutating.yaml", "templates/webhook/mutating.yaml", (_NS, _INJECT_CA)),
    Template("monitoring/service.yaml", "templates/monitoring/service.yaml", (_NS,), _MONITORING),
    Template(
        "monitoring/servicemonitor.yaml",
        "templates/monitoring/servicemonitor.yaml",
        (_NS,),
        _MONITORING,
    ),
    Template(
        "monitoring/prometheusrule.yaml",
        "templates/monitoring/prometheusrule.yaml",
        (_NS,),
        _MONITORING,
    ),
)

DASHBOARD = "monitoring/grafana-dashboard.json"
DASHBOARD_TEMPLATE = """\
{{- if .Values.monitoring.enabled }}
# The Grafana dashboard for Grafana's dashboard sidecar; the same ConfigMap as
# manifests/monitoring/kustomization.yaml generates from the same JSON file.
apiVersion: v1
kind: ConfigMap
metadata:
  name: captf-grafana-dashboard
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: captf
    grafana_dashboard: "1"
data:
  captf.json: |-
    {{- .Files.Get "dashboards/captf.json" | nindent 4 }}
{{- end }}
"""

CHART_YAML = f"""\
# Generated by `captf dev chart` from manifests/; do not edit by hand.
apiVersion: v2
name: captf
description: Runs Terraform/OpenTofu operations as Kubernetes Jobs and retries them by precise rules
type: application
version: {VERSION}
appVersion: dev
"""

HEADER = "# Generated by `captf dev chart` from manifests/{source}; do not edit by hand.\n"


class ChartError(ValueError):
    """A manifest no longer has the line a substitution expects; the message names both."""


def _edit(text: str, edit: Sub | Block, source: str) -> str:
    lines = text.split("\n")
    key = edit.old if isinstance(edit, Sub) else f"{edit.key}:"
    hits = [i for i, line in enumerate(lines) if line.strip() == key]
    if isinstance(edit, Sub) and edit.old.startswith("namespace: ") and hits:
        for i in hits:
            lines[i] = lines[i].replace(edit.old, edit.new)
        return "\n".join(lines)
    if len(hits) != 1:
        raise ChartError(
            f"manifests/{source}: expected exactly one line {key!r}, found {len(hits)}"
        )
    i = hits[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    if isinstance(edit, Sub):
        lines[i] = indent + edit.new
        return "\n".join(lines)
    end = i + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > len(indent)
    ):
        end += 1
    lines[i + 1 : end] = [indent + "  " + edit.template]
    return "\n".join(lines)


def template(spec: Template, manifests: Path) -> str:
    text = (manifests / spec.source).read_text()
    text = _BRACES.sub(lambda m: '{{ "{{" }}' if m.group() == "{{" else '{{ "}}" }}', text)
    for edit in spec.edits:
        text = _edit(text, edit, spec.source)
    body = HEADER.format(source=spec.source) + text
    if spec.condition:
        body = f"{{{{- if {spec.condition} }}}}\n{body.rstrip()}\n{{{{- end }}}}\n"
    return body


def _flag(container: dict[str, Any], flag: str) -> str:
    return next(str(a).split("=", 1)[1] for a in container["args"] if a.startswith(f"{flag}="))


def values(manifests: Path) -> str:
    """values.yaml: the defaults are the manifests' own values."""
    deployment = yaml.safe_load((manifests / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    repository, _, tag = container["image"].partition(":")
    doc: dict[str, Any] = {
        "replicas": deployment["spec"]["replicas"],
        "image": {
            "repository": repository,
            "tag": tag,
            "pullPolicy": container["imagePullPolicy"],
        },
        "logFormat": next(
            a.split("=", 1)[1] for a in container["args"] if a.startswith("--log-format=")
        ),
        "resources": container["resources"],
        "moduleImageMount": _flag(container, "--module-image-mount"),
        "jobDefaults": json.loads(_flag(container, "--job-defaults")),
        "monitoring": {"enabled": False},
    }
    comment = (
        "# Generated by `captf dev chart` from manifests/; do not edit by hand.\n"
        "# monitoring.enabled: the metrics Service, a ServiceMonitor, a PrometheusRule and\n"
        "# the Grafana dashboard ConfigMap (needs the Prometheus Operator's CRDs).\n"
    )
    return comment + yaml.safe_dump(doc, sort_keys=False)


def files(root: Path = ROOT) -> dict[Path, str]:
    """Every file of the chart, by path under the chart, as generated from `root`."""
    manifests = root / "manifests"
    out = {Path("Chart.yaml"): CHART_YAML, Path("values.yaml"): values(manifests)}
    for spec in TEMPLATES:
        out[Path(spec.target)] = template(spec, manifests)
    out[Path("templates/monitoring/grafana-dashboard.yaml")] = DASHBOARD_TEMPLATE
    out[Path("dashboards/captf.json")] = (manifests / DASHBOARD).read_text()
    for crd in sorted((manifests / "crds").glob("*.yaml")):
        out[Path("crds") / crd.name] = crd.read_text()
    return out


def differences(root: Path = ROOT) -> list[str]:
    """Chart files that differ from what the manifests generate, or should not be there."""
    want = files(root)
    chart = root / CHART
    have = {p.relative_to(chart) for p in chart.rglob("*") if p.is_file()}
    stale = sorted(str(p) for p in have - set(want))
    changed = [
        str(p)
        for p, text in sorted(want.items())
        if not (chart / p).is_file() or (chart / p).read_text() != text
    ]
    return changed + stale


def write(root: Path = ROOT) -> None:
    chart = root / CHART
    for path, text in files(root).items():
        (chart / path).parent.mkdir(parents=True, exist_ok=True)
        (chart / path).write_text(text)


def run(args: argparse.Namespace) -> int:
    return run_generator(
        args,
        target=CHART,
        differences=differences,
        write=write,
        error=ChartError,
        verb="captf dev chart",
    )
