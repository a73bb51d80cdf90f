"""TerraformPolicies as the core reads them: which select an object, and the policy set
its apply and plan Jobs are given.

A policy selects an object when its namespaceSelector matches the labels of the
object's Namespace and its objectSelector the object's own labels (unset or empty:
everything). The policy set is the rules of every policy that selects the object, in
the order of the policies' names, and the subject the rules see: the object's kind,
namespace, name and labels, and its Cluster API Cluster's name and labels. Labels under
`captf.io/` are left out: the controller writes some itself, and a rule must not be
judged again because of them; so is Cluster API's cluster-name label from the object's
labels (it arrives after creation; the subject's cluster name is the same fact).

The set is what the runner judges with (`RunnerVar.POLICIES`, its JSON) and its hash is
the policy version: a Job records the hash it was given (`captf.io/policy-hash`), and a
PolicyDenied wait lasts while the object's current set has the denied Job's hash. So an
edit of a rule, a new or deleted policy, or a label change that selects differently or
changes what a rule reads ends the wait. One codec: `encode` writes the JSON,
`decode` reads it back. Pure."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Final

import orjson

from controller.core.basics.names import CAPI_CLUSTER, LABEL_CLUSTER_NAME
from controller.core.spec.identity import selector_matches
from controller.core.spec.refs import cluster_name_of, spec_of
from runtime.jsonobj import Json

# The most a Job's environment carries (Linux refuses one variable over 128 KiB); a
# larger set is not sent, and the apply waits PolicyDenied until the policies shrink.
ENCODED_LIMIT: Final = 64 * 1024
# The controller's own labels, not shown to rules.
OWN_LABEL_PREFIX: Final = "captf.io/"


class Scope(StrEnum):
    RESOURCE = "Resource"  # once per resource change: `resource`
    PLAN = "Plan"  # once per plan: `plan`


class Action(StrEnum):
    DENY = "Deny"
    REQUIRE_APPROVAL = "RequireApproval"
    WARN = "Warn"


# The strongest first: a plan matched by rules of several actions gets the first.
ACTIONS: Final = (Action.DENY, Action.REQUIRE_APPROVAL, Action.WARN)


@dataclass(frozen=True)
class Rule:
    """One rule as its policy states it."""

    policy: str
    name: str
    scope: Scope
    action: Action
    expression: str
    message: str

    def to_json(self) -> Json:
        return {
            "policy": self.policy,
            "name": self.name,
            "scope": self.scope.value,
            "action": self.action.value,
            "expression": self.expression,
            "message": self.message,
        }


class PolicySetError(ValueError):
    """The runner's policy set is not one the controller wrote."""


@dataclass(frozen=True)
class PolicySet:
    rules: tuple[Rule, ...]
    subject: Json  # {"object": {...}, "cluster": {...}}: the rules' other variables

    def encode(self) -> str:
        return self._encoded

    @cached_property
    def _encoded(self) -> str:
        body = {"rules": [r.to_json() for r in self.rules], "subject": self.subject}
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()

    @cached_property
    def hash(self) -> str:
        return "sha256:" + hashlib.sha256(self.encode().encode()).hexdigest()

    def too_large(self) -> bool:
        return len(self.encode().encode()) > ENCODED_LIMIT


def decode(text: str) -> PolicySet:
    """The set `encode` wrote; PolicySetError for anything else."""
    try:
        body = orjson.loads(text)
        rules = tuple(_rule(r) for r in body["rules"])
        subject = body["subject"]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise PolicySetError(f"the policy set does not read: {exc}") from None
    if not isinstance(subject, dict):
        raise PolicySetError("the policy set has no subject")
    return PolicySet(rules, subject)


def _rule(entry: Json) -> Rule:
    return Rule(
        policy=str(entry["policy"]),
        name=str(entry["name"]),
        scope=Scope(entry["scope"]),
        action=Action(entry["action"]),
        expression=str(entry["expression"]),
        message=str(entry["message"]),
    )


def rules_of(policy: Json) -> tuple[Rule, ...]:
    """A TerraformPolicy's rules, the scope defaulted as the CRD does. An entry the CRD
    would refuse (stored by hand, or by an older schema) is kept as a Deny whose
    expression does not compile, so it fails closed where it runs."""
    name = str((policy.get("metadata") or {}).get("name", ""))
    out = []
    for index, entry in enumerate(spec_of(policy).get("rules") or []):
        entry = entry if isinstance(entry, dict) else {}
        try:
            scope, action = Scope(entry.get("scope") or Scope.RESOURCE), Action(entry["action"])
        except (KeyError, ValueError):
            scope, action = Scope.RESOURCE, Action.DENY
        expression = entry.get("expression")
        out.append(
            Rule(
                policy=name,
                name=str(entry.get("name") or f"rules[{index}]"),
                scope=scope,
                action=action,
                expression=expression if isinstance(expression, str) else "",
                message=str(entry.get("message") or ""),
            )
        )
    return tuple(out)


def selects(policy: Json, labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> bool:
    spec = spec_of(policy)
    return all(
        selector_matches(selector if isinstance(selector, dict) else {}, found)
        for selector, found in (
            (spec.get("namespaceSelector"), namespace_labels),
            (spec.get("objectSelector"), labels),
        )
    )


def _shown(labels: object) -> dict[str, str]:
    if not isinstance(labels, dict):
        return {}
    return {str(k): str(v) for k, v in labels.items() if not str(k).startswith(OWN_LABEL_PREFIX)}


def _subject_labels(labels: object) -> dict[str, str]:
    """The object's labels as its rules see them: also without Cluster API's cluster-name
    label, which Cluster API puts on a TerraformCluster some time after it is created
    (a denied apply must not be judged again for it); `cluster.name` says the same."""
    return {k: v for k, v in _shown(labels).items() if k != LABEL_CLUSTER_NAME}


def subject_of(obj: Json, related: Mapping[tuple[str, str], Json]) -> Json:
    """What the rules see of the object and its Cluster API Cluster."""
    meta = obj.get("metadata") or {}
    name = cluster_name_of(obj)
    cluster = related.get((CAPI_CLUSTER, name)) if name else None
    return {
        "object": {
            "kind": str(obj.get("kind", "")),
            "namespace": str(meta.get("namespace", "")),
            "name": str(meta.get("name", "")),
            "labels": _subject_labels(meta.get("labels")),
        },
        "cluster": {
            "name": name,
            "labels": _shown(((cluster or {}).get("metadata") or {}).get("labels")),
        },
    }


def policy_set(
    policies: Iterable[Json],
    obj: Json,
    related: Mapping[tuple[str, str], Json],
    namespace_labels: Mapping[str, str],
) -> PolicySet | None:
    """The rules of the policies that select `obj` (by name), with its subject; None when
    no policy selects it (its Jobs are then given none, and judge nothing)."""
    labels = _shown((obj.get("metadata") or {}).get("labels"))
    chosen = sorted(
        (p for p in policies if selects(p, labels, namespace_labels)),
        key=lambda p: str((p.get("metadata") or {}).get("name", "")),
    )
    rules = tuple(rule for p in chosen for rule in rules_of(p))
    return PolicySet(rules, subject_of(obj, related)) if rules else None
