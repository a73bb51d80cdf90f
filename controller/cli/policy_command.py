"""`captf policy test POLICY.yaml PLAN.json`: a plan judged by TerraformPolicies offline,
as the runner judges it, so a team tests its policies in its own CI.

POLICY.yaml holds one or more TerraformPolicy documents; PLAN.json is `tofu show -json`
of a saved plan. Every rule is first compiled as the admission webhook compiles it (a
refusal is printed with its position and nothing is judged). With `--object FILE` (a
TerraformCluster, TerraformMachinePool or TerraformMachine) the policies' selectors pick
as the controller picks (`--namespace-labels`, `--cluster-labels` for what the file
cannot say), and the rules see that object; without it every policy's rules are judged,
for an object of no labels. `--approved` judges it as the apply of an approved plan.

One line per matched rule, then the verdict, on standard output (`--json`: one JSON
document, with the cost counted against the limit). Exit status: 0 when the plan would
apply (compliant, or warnings only), 1 when it is denied, 3 when it waits for an
approval, 2 when an input cannot be used."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import orjson
import yaml

from controller.cli import api_yaml
from controller.core.basics.names import POLICY_KIND
from controller.core.jobs.policy_report import Report, Verdict
from controller.core.spec.plan_policies import PolicySet, policy_set, rules_of, subject_of
from controller.policy.admission import refusals
from controller.policy.judge import PLAN_COST_LIMIT, Judgement, judge
from controller.policy.verdict import report_from
from runtime.jsonobj import Json

EXIT_APPLIES = 0
EXIT_DENIED = 1
EXIT_UNUSABLE = 2
EXIT_HELD = 3


class Unusable(ValueError):
    """An input cannot be used; the message says which and why, in one line."""


def run(args: argparse.Namespace) -> int:
    try:
        policies = _policies(args.policy)
        plan = _plan(args.plan)
        chosen = _chosen(args, policies)
    except Unusable as err:
        print(f"captf policy test: {err}", file=sys.stderr)
        return EXIT_UNUSABLE
    refused = [
        f"{args.policy}: TerraformPolicy {_name(p)}: {r.message}"
        for p in policies
        for r in refusals(p)
    ]
    if refused:
        print("\n".join(refused), file=sys.stderr)
        return EXIT_UNUSABLE
    found = judge(chosen.rules, plan, chosen.subject) if chosen.rules else _nothing()
    report = report_from(found, approved=args.approved)
    if args.json:
        print(json.dumps(_document(report, found, chosen), indent=2))
    else:
        print("\n".join(lines_of(report, found, chosen)))
    return _exit(report.verdict)


def _nothing() -> Judgement:
    return Judgement((), 0, judged=True)


def _name(policy: Json) -> str:
    return str((policy.get("metadata") or {}).get("name", "?"))


def _policies(path: str) -> list[Json]:
    try:
        docs = api_yaml.load_all(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, api_yaml.AliasRefused) as err:
        raise Unusable(f"cannot read {path}: {type(err).__name__}") from None
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == POLICY_KIND]
    if not found:
        raise Unusable(f"{path} holds no {POLICY_KIND}")
    return found


def _plan(path: str) -> Json:
    try:
        plan = orjson.loads(Path(path).read_bytes())
    except OSError as err:
        raise Unusable(f"cannot read {path}: {err.strerror or err}") from None
    except orjson.JSONDecodeError:
        raise Unusable(f"{path} is not JSON (tofu show -json PLANFILE writes it)") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("resource_changes", []), list):
        raise Unusable(f"{path} is not a plan: no resource_changes list")
    return plan


def _labels(text: str | None) -> dict[str, str]:
    pairs = [p for p in (text or "").split(",") if p]
    if any("=" not in p for p in pairs):
        raise Unusable(f"labels are KEY=VALUE,...: {text!r}")
    return dict(p.split("=", 1) for p in pairs)


def _chosen(args: argparse.Namespace, policies: list[Json]) -> PolicySet:
    """The set the runner would be given: selected by the object when one is named,
    else every policy's rules for an object with no labels."""
    cluster_labels = _labels(args.cluster_labels)
    if args.object is None:
        subject = {"object": {"kind": "", "namespace": "", "name": "", "labels": {}}}
        subject["cluster"] = {"name": "", "labels": cluster_labels}
        return PolicySet(tuple(r for p in policies for r in rules_of(p)), subject)
    try:
        obj = api_yaml.load(Path(args.object).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, api_yaml.AliasRefused) as err:
        raise Unusable(f"cannot read {args.object}: {type(err).__name__}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        raise Unusable(f"{args.object} is no API object")
    name = subject_of(obj, {})["cluster"]["name"]
    cluster = {"metadata": {"name": name, "labels": cluster_labels}}
    related = {("Cluster", name): cluster} if name else {}
    chosen = policy_set(policies, obj, related, _labels(args.namespace_labels))
    return chosen or PolicySet((), subject_of(obj, related))


def lines_of(report: Report, found: Judgement, chosen: PolicySet) -> list[str]:
    lines = [f"{v.action.upper():<16} {v.line()}" for v in report.violations]
    more = report.total - len(report.violations)
    if more > 0:
        lines.append(f"... and {more} more rule(s) matched")
    judged = "judged" if found.judged else "not judged: over a bound, every rule matches"
    lines.append(
        f"{report.verdict.value}: {len(chosen.rules)} rule(s), {judged}; cost "
        f"{found.cost:,} of {PLAN_COST_LIMIT:,} units"
    )
    lines += [f"  ({v.rule.name}: {v.detail})" for v in found.violations if v.detail]
    return lines


def _document(report: Report, found: Judgement, chosen: PolicySet) -> Json:
    return {
        "verdict": report.verdict.value,
        "rules": len(chosen.rules),
        "judged": found.judged,
        "cost": found.cost,
        "costLimit": PLAN_COST_LIMIT,
        "violations": [
            {
                "policy": v.rule.policy,
                "rule": v.rule.name,
                "action": v.rule.action.value,
                "why": v.why.value,
                "message": v.rule.message,
                "addresses": list(v.addresses),
                "detail": v.detail,
            }
            for v in found.violations
        ],
    }


def _exit(verdict: Verdict) -> int:
    if verdict is Verdict.DENIED:
        return EXIT_DENIED
    return EXIT_HELD if verdict is Verdict.APPROVAL_REQUIRED else EXIT_APPLIES
