"""How a runner pod is shaped on the cluster it runs on: the policy fields of `spec.jobs`
(resources, pull Secrets, security contexts, scheduling, priority, extra env).

None of them is an input: they say where and how a Job runs, never what it applies, so
none enters the inputs hash and changing one re-applies nothing. Each field is taken
whole from the first that sets it: the object, then (for a pool or machine) its
TerraformCluster, then the operator's `--job-defaults`, then the compiled default
below. The two security contexts are then laid over the restricted Pod Security
profile key by key, so a level can add (a `runAsUser`, an `fsGroup`) but never drop a
protection (the webhook refuses a weakening, controller/core/admission/security.py).
Pure."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from runtime.jsonobj import Json

RESOURCES: Final = "resources"
PULL_SECRETS: Final = "imagePullSecrets"
POD_CONTEXT: Final = "podSecurityContext"
CONTEXT: Final = "securityContext"
NODE_SELECTOR: Final = "nodeSelector"
TOLERATIONS: Final = "tolerations"
AFFINITY: Final = "affinity"
PRIORITY: Final = "priorityClassName"
ENV: Final = "env"
# Every policy field of spec.jobs, in the order docs/api.md lists them.
FIELDS: Final = (
    RESOURCES,
    PULL_SECRETS,
    POD_CONTEXT,
    CONTEXT,
    NODE_SELECTOR,
    TOLERATIONS,
    AFFINITY,
    PRIORITY,
    ENV,
)

# Requests that a namespace quota on requests.cpu/requests.memory admits (a pod without
# requests is refused by such a quota), and limits that bound OpenTofu, so that one large
# plan cannot starve its node; a quota on limits.cpu/limits.memory admits these too. The
# memory limit leaves room for heavy providers (cloud providers' plugins take hundreds of
# MiB on large states); an object that needs more says so.
DEFAULT_RESOURCES: Final[Json] = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"cpu": "1", "memory": "2Gi"},
}
# The restricted Pod Security profile (the parts a runner pod sets itself).
RESTRICTED_POD: Final[Json] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER: Final[Json] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}

# Environment names the runner owns or relies on. CAPTF_ is the runner contract's
# (controller/core/basics/runner_vars.py). Every TF_ name is refused, not only those the
# runner sets (TF_IN_AUTOMATION, TF_INPUT, TF_CLI_CONFIG_FILE): TF_VAR_x would change a
# variable behind the inputs hash, TF_CLI_ARGS changes the commands, TF_LOG writes what
# providers see (credentials included) to the log. The rest are what the runner's
# process and OpenTofu are found and run by.
RESERVED_ENV_PREFIXES: Final = ("CAPTF_", "TF_", "KUBERNETES_", "PYTHON", "LD_")
RESERVED_ENV_NAMES: Final = frozenset(
    {"PATH", "HOME", "TMPDIR", "HOSTNAME", "CHECKPOINT_DISABLE", "VIRTUAL_ENV"}
)
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
# A Kubernetes quantity, as the CRDs' pattern (controller-gen's for resource.Quantity).
_QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class PodPolicyError(ValueError):
    """A policy field has the wrong shape; the message names it (never a value)."""


def reserved_env(name: str) -> str | None:
    """Why an extra env name is the runner's, or None when it is free."""
    if name in RESERVED_ENV_NAMES:
        return f"{name} is set by the runner's pod"
    prefix = next((p for p in RESERVED_ENV_PREFIXES if name.startswith(p)), None)
    if prefix is not None:
        return f"names starting {prefix} are reserved for the runner and OpenTofu"
    return None


@dataclass(frozen=True)
class PodPolicy:
    """The policy fields, each resolved; what jobspec puts on the pod and container."""

    resources: Json = field(default_factory=lambda: dict(DEFAULT_RESOURCES))
    image_pull_secrets: tuple[str, ...] = ()
    pod_security_context: Json = field(default_factory=lambda: dict(RESTRICTED_POD))
    security_context: Json = field(default_factory=lambda: dict(RESTRICTED_CONTAINER))
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Json, ...] = ()
    affinity: Json | None = None
    priority_class_name: str | None = None
    env: tuple[Json, ...] = ()

    def pod_fields(self) -> Json:
        """The pod spec's scheduling and pull fields (the security context apart)."""
        pod: Json = {}
        if self.image_pull_secrets:
            pod["imagePullSecrets"] = [{"name": n} for n in self.image_pull_secrets]
        if self.node_selector:
            pod["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            pod["tolerations"] = [dict(t) for t in self.tolerations]
        if self.affinity:
            pod["affinity"] = self.affinity
        if self.priority_class_name:
            pod["priorityClassName"] = self.priority_class_name
        return pod


def _mapping(value: object, path: str) -> Json:
    if not isinstance(value, dict):
        raise PodPolicyError(f"{path} must be an object")
    return value


def _list(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise PodPolicyError(f"{path} must be a list")
    return value


def _resources(value: object, path: str) -> Json:
    found = _mapping(value, path)
    for part, amounts in found.items():
        if part not in ("requests", "limits"):
            raise PodPolicyError(f"{path}.{part} is not requests or limits")
        for name, amount in _mapping(amounts, f"{path}.{part}").items():
            if isinstance(amount, bool) or not _QUANTITY.match(str(amount)):
                raise PodPolicyError(f"{path}.{part}.{name} must be a quantity such as 500m or 1Gi")
    return {part: {k: str(v) for k, v in amounts.items()} for part, amounts in found.items()}


def _names(value: object, path: str) -> tuple[str, ...]:
    names = []
    for i, entry in enumerate(_list(value, path)):
        name = _mapping(entry, f"{path}[{i}]").get("name")
        if not (isinstance(name, str) and _DNS_SUBDOMAIN.match(name)):
            raise PodPolicyError(f"{path}[{i}].name must be a Secret's name")
        names.append(name)
    return tuple(dict.fromkeys(names))


def _strings(value: object, path: str) -> dict[str, str]:
    found = _mapping(value, path)
    if not all(isinstance(v, str) for v in found.values()):
        raise PodPolicyError(f"{path} must map names to strings")
    return {str(k): v for k, v in found.items()}


def _env(value: object, path: str) -> tuple[Json, ...]:
    """Literal name/value pairs only: a value from a Secret would reach the runner's
    process without the runner knowing to redact it (credentials go in identityRef)."""
    entries = []
    for i, entry in enumerate(_list(value, path)):
        item = _mapping(entry, f"{path}[{i}]")
        name, text = item.get("name"), item.get("value", "")
        if not (isinstance(name, str) and _ENV_NAME.match(name)):
            raise PodPolicyError(f"{path}[{i}].name must be an environment variable name")
        if set(item) - {"name", "value"} or not isinstance(text, str):
            raise PodPolicyError(f"{path}[{i}] must be a name and a string value")
        entries.append({"name": name, "value": text})
    return tuple(entries)


def _objects(value: object, path: str) -> tuple[Json, ...]:
    return tuple(_mapping(v, f"{path}[{i}]") for i, v in enumerate(_list(value, path)))


def _priority(value: object, path: str) -> str:
    if not (isinstance(value, str) and _DNS_SUBDOMAIN.match(value)):
        raise PodPolicyError(f"{path} must be a PriorityClass's name")
    return value


def _pod_context(value: object, path: str) -> Json:
    return RESTRICTED_POD | _mapping(value, path)


def _container_context(value: object, path: str) -> Json:
    return RESTRICTED_CONTAINER | _mapping(value, path)


# (field of spec.jobs, attribute of PodPolicy, reader of the value at a path).
_READERS: Final[tuple[tuple[str, str, Callable[[object, str], object]], ...]] = (
    (RESOURCES, "resources", _resources),
    (PULL_SECRETS, "image_pull_secrets", _names),
    (POD_CONTEXT, "pod_security_context", _pod_context),
    (CONTEXT, "security_context", _container_context),
    (NODE_SELECTOR, "node_selector", _strings),
    (TOLERATIONS, "tolerations", _objects),
    (AFFINITY, "affinity", _mapping),
    (PRIORITY, "priority_class_name", _priority),
    (ENV, "env", _env),
)


def resolve(
    jobs: Json, *, inherited: Json | None = None, defaults: Json | None = None
) -> PodPolicy:
    """The pod policy of `jobs` (an object's spec.jobs), taking each unset field from
    `inherited` (its TerraformCluster's spec.jobs) and then `defaults` (the operator's);
    PodPolicyError names the first field of the wrong shape."""
    levels = (
        ("spec.jobs", jobs),
        ("the cluster's spec.jobs", inherited or {}),
        ("--job-defaults", defaults or {}),
    )
    changes: Json = {}
    for name, attribute, read in _READERS:
        for path, level in levels:
            value = level.get(name)
            if value is not None:
                changes[attribute] = read(value, f"{path}.{name}")
                break
    return replace(PodPolicy(), **changes)


def check_defaults(defaults: Json) -> None:
    """The operator's `--job-defaults`: only policy fields, each of the right shape
    (PodPolicyError says which)."""
    unknown = sorted(set(defaults) - set(FIELDS))
    if unknown:
        raise PodPolicyError(f"--job-defaults has fields that are not policy fields: {unknown}")
    resolve({}, defaults=defaults)
