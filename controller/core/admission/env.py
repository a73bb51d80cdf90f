"""Extra environment for the runner (`spec.jobs.env`): no name the runner owns or relies on.

The runner contract's variables, OpenTofu's `TF_` variables and what the runner's
process is found and run by are the controller's to set (controller/core/spec/jobpod.py
lists them and says why); an object that names one is refused before it is stored, and
waits InvalidSpec at reconcile should it get past a missing webhook."""

from __future__ import annotations

from controller.core.admission.refusal import Refusal
from controller.core.spec.jobpod import reserved_env
from runtime.jsonobj import Json


def refusals(spec: Json, prefix: str = "spec") -> list[Refusal]:
    jobs = spec.get("jobs")
    entries = jobs.get("env") if isinstance(jobs, dict) else None
    found = []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        name = entry.get("name") if isinstance(entry, dict) else None
        why = reserved_env(name) if isinstance(name, str) else None
        if why is not None:
            found.append(Refusal(f"{prefix}.jobs.env[{i}].name", f"is reserved: {why}"))
    return found
