"""Security context a Job may not be given: nothing that weakens the runner's pod.

The controller builds every runner pod hardened (non-root, no privilege escalation, all
capabilities dropped, a read-only root filesystem, the runtime's seccomp profile: the
restricted Pod Security profile). `spec.jobs.podSecurityContext` and
`spec.jobs.securityContext` may add to that (a `runAsUser`, an `fsGroup`, a seccomp
profile of the node's), never take from it: any key that turns a protection off is
refused, naming the field. The same rules hold for fields the CRDs do not have (host
namespaces, volumes), for snapshots read from files (`captf decide -f` does not prune),
and for the operator's `--job-defaults`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from controller.core.admission.refusal import Refusal
from runtime.jsonobj import Json

# (key, the rule, a test that the value weakens the pod), for a security context.
_CONTEXT_RULES: tuple[tuple[str, str, Callable[[object], bool]], ...] = (
    ("privileged", "may not be true", lambda v: v is True),
    ("allowPrivilegeEscalation", "may not be true", lambda v: v is True),
    ("runAsNonRoot", "may not be false", lambda v: v is False),
    ("runAsUser", "may not be 0 (root)", lambda v: v == 0 and not isinstance(v, bool)),
    ("runAsGroup", "may not be 0 (root)", lambda v: v == 0 and not isinstance(v, bool)),
    ("readOnlyRootFilesystem", "may not be false", lambda v: v is False),
    ("procMount", "may not be Unmasked", lambda v: v == "Unmasked"),
)
# Pod fields that share the node's namespaces.
_HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")


def _context(path: str, context: object) -> Iterator[Refusal]:
    if not isinstance(context, dict):
        return
    for key, rule, weakens in _CONTEXT_RULES:
        if key in context and weakens(context[key]):
            yield Refusal(f"{path}.{key}", rule)
    capabilities = context.get("capabilities")
    if isinstance(capabilities, dict) and capabilities.get("add") not in (None, []):
        yield Refusal(f"{path}.capabilities.add", "may not add capabilities")
    drop = capabilities.get("drop") if isinstance(capabilities, dict) else None
    if isinstance(capabilities, dict) and (not isinstance(drop, list) or "ALL" not in drop):
        # Given, it replaces the runner's drop of ALL.
        yield Refusal(f"{path}.capabilities.drop", "must include ALL")
    for profile in ("seccompProfile", "appArmorProfile"):
        given = context.get(profile)
        if isinstance(given, dict) and given.get("type") == "Unconfined":
            yield Refusal(f"{path}.{profile}.type", "may not be Unconfined")


def refusals(spec: Json, prefix: str = "spec") -> list[Refusal]:
    jobs = spec.get("jobs")
    if not isinstance(jobs, dict):
        return []
    path = f"{prefix}.jobs"
    found = [
        *_context(f"{path}.podSecurityContext", jobs.get("podSecurityContext")),
        *_context(f"{path}.securityContext", jobs.get("securityContext")),
    ]
    for key in _HOST_NAMESPACES:
        if jobs.get(key) is True:
            found.append(Refusal(f"{path}.{key}", "may not be true"))
    volumes = jobs.get("volumes")
    for i, volume in enumerate(volumes if isinstance(volumes, list) else []):
        if isinstance(volume, dict) and "hostPath" in volume:
            found.append(Refusal(f"{path}.volumes[{i}].hostPath", "may not mount the node's files"))
    return found
