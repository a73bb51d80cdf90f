"""The runner's RBAC in an object's namespace: what the controller provides, what an
override account must show, and when the provided pieces go.

The controller provides one identity per namespace: ServiceAccount `captf-runner` and
RoleBinding `captf-runner` to the static ClusterRole `captf-runner` (the least the
runner needs, manifests/runner-rbac.yaml). It creates them before the namespace's
first Job and removes them once the namespace holds no CAPTF object and no CAPTF Job
runs there. An object whose spec.jobs.serviceAccountName names another account runs
as that account only when it carries `captf.io/runner=true`: the label is the
account owner's consent that a module's code runs with its rights.

Pure: decisions of what the caches show (RunnerFacts); io creates and deletes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from controller.core.basics.names import (
    LABEL_MANAGED_BY,
    LABEL_RUNNER,
    LABEL_RUNNER_RBAC,
    MANAGER,
    RUNNER_ACCOUNT,
    RUNNER_RBAC_MANAGED,
)
from runtime.jsonobj import Json

CONDITION: Final = "RunnerRBACReady"
# Reasons of the condition.
PROVIDED: Final = "Provided"  # captf-runner, created (or found) by the controller
OPTED_IN: Final = "OptedIn"  # an override account labelled captf.io/runner=true
NAMESPACE_DEFAULT: Final = "NamespaceDefault"  # no account allowed by name: the default's
NOT_OPTED_IN: Final = "ServiceAccountNotOptedIn"

# The labels of what the controller provides. The ServiceAccount also carries the
# opt-in label, so one label-selected watch of ServiceAccounts shows both kinds.
MANAGED_LABELS: Final = {
    LABEL_MANAGED_BY: MANAGER,
    LABEL_RUNNER_RBAC: RUNNER_RBAC_MANAGED,
}
ACCOUNT_LABELS: Final = MANAGED_LABELS | {LABEL_RUNNER: "true"}
RBAC_GROUP: Final = "rbac.authorization.k8s.io"
ROLE_REF: Final = {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": RUNNER_ACCOUNT}


@dataclass(frozen=True)
class RunnerFacts:
    """What the caches show of one namespace: its ServiceAccounts labelled
    captf.io/runner=true (name -> labels), and whether the RoleBinding captf-runner
    labelled as managed exists. A hand-made account without the label is not shown,
    which is the point: it has not opted in."""

    accounts: Mapping[str, Mapping[str, str]]
    binding: bool


def facts_of(accounts: Iterable[Json], bindings: Iterable[Json]) -> RunnerFacts:
    """The RunnerFacts of a namespace from its ServiceAccounts labelled captf.io/runner=true
    and its RoleBindings named captf-runner (only a managed one counts): the caches'
    view (controller/io/caches.py) and `captf decide --live`'s read (controller/cli/live.py)."""
    return RunnerFacts(
        accounts=MappingProxyType(
            {
                a["metadata"]["name"]: a["metadata"].get("labels") or {}
                for a in accounts
                if (a["metadata"].get("labels") or {}).get(LABEL_RUNNER) == "true"
            }
        ),
        binding=any(
            b["metadata"]["name"] == RUNNER_ACCOUNT and is_managed(b["metadata"].get("labels"))
            for b in bindings
        ),
    )


@dataclass(frozen=True)
class Verdict:
    """Whether the object's Jobs may start as their account, why (the condition), and
    what must be created first (before the Job, in the same pass)."""

    ready: bool
    reason: str
    message: str
    creates: tuple[Json, ...] = ()

    def condition(self) -> Json:
        return {
            "type": CONDITION,
            "status": "True" if self.ready else "False",
            "reason": self.reason,
            "message": self.message,
        }


def verdict(namespace: str, account: str | None, facts: RunnerFacts) -> Verdict:
    """The runner RBAC of an object whose Jobs run as `account` (None: the namespace's
    default account, when the operator allows no account by name)."""
    if account is None:
        return Verdict(True, NAMESPACE_DEFAULT, "the Jobs run as the namespace's default account")
    if account == RUNNER_ACCOUNT:
        creates: list[Json] = []
        if account not in facts.accounts:
            creates.append(service_account(namespace))
        if not facts.binding:
            creates.append(role_binding(namespace))
        message = (
            f"ServiceAccount {account} bound to ClusterRole {RUNNER_ACCOUNT}, "
            "provided by the controller"
        )
        return Verdict(True, PROVIDED, message, tuple(creates))
    labels = facts.accounts.get(account)
    if labels is not None and labels.get(LABEL_RUNNER) == "true":
        return Verdict(True, OPTED_IN, f"ServiceAccount {account} opted in ({LABEL_RUNNER}=true)")
    message = (
        f"ServiceAccount {account} is not labelled {LABEL_RUNNER}=true (or does not exist); "
        "an account other than the provided captf-runner must opt in with that label"
    )
    return Verdict(False, NOT_OPTED_IN, message)


def service_account(namespace: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": RUNNER_ACCOUNT, "namespace": namespace, "labels": ACCOUNT_LABELS},
    }


def role_binding(namespace: str) -> Json:
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": RUNNER_ACCOUNT, "namespace": namespace, "labels": MANAGED_LABELS},
        "roleRef": ROLE_REF,
        "subjects": [{"kind": "ServiceAccount", "name": RUNNER_ACCOUNT, "namespace": namespace}],
    }


def is_managed(labels: Mapping[str, str] | None) -> bool:
    return (labels or {}).get(LABEL_RUNNER_RBAC) == RUNNER_RBAC_MANAGED


def removals(objects_left: int, jobs_running: int, facts: RunnerFacts) -> tuple[str, ...]:
    """The kinds to delete ("RoleBinding" first, then "ServiceAccount") once a namespace
    holds no CAPTF object and runs no CAPTF Job: a destroy Job still running needs its
    account until it ends (an object's finalizer goes only after its destroy finished,
    but a Job of an older object of the same name may outlive it). Only what the
    controller provided goes; a hand-made captf-runner never shows as managed."""
    if objects_left or jobs_running:
        return ()
    out = ["RoleBinding"] if facts.binding else []
    if is_managed(facts.accounts.get(RUNNER_ACCOUNT)):
        out.append("ServiceAccount")
    return tuple(out)
