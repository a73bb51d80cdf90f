"""Rendering the durable inputs Secret into a work directory tofu can run in."""

from __future__ import annotations

import base64
from pathlib import Path

from controller.runner.kube import Json

MODULE_PREFIX = "module."
VARIABLES_KEY = "variables.json"
TFVARS_FILE = "terraform.tfvars.json"
# The runner keeps state in its Secret, so tofu must use the local backend in
# the work directory whatever the module declares; an override file replaces
# the module's backend block, if it has one.
BACKEND_OVERRIDE_FILE = "_captf_backend_override.tf"
BACKEND_OVERRIDE = 'terraform {\n  backend "local" {\n    path = "terraform.tfstate"\n  }\n}\n'
_RESERVED = frozenset({TFVARS_FILE, BACKEND_OVERRIDE_FILE, "terraform.tfstate", "tfplan"})


class RenderError(ValueError):
    """The inputs Secret cannot be rendered: the message says why."""


def module_files(inputs_secret: Json) -> dict[str, bytes]:
    """File name -> content, from the `module.<file>` keys."""
    data: dict[str, str] = inputs_secret.get("data") or {}
    files = {}
    for key, value in data.items():
        if not key.startswith(MODULE_PREFIX):
            continue
        name = key[len(MODULE_PREFIX) :]
        if not name or name in {".", ".."} or "/" in name or name in _RESERVED:
            raise RenderError(f"module file name {name!r} is not allowed")
        files[name] = base64.b64decode(value)
    if not files:
        raise RenderError("the inputs Secret has no module.<file> keys")
    return files


def render(work_dir: Path, inputs_secret: Json) -> None:
    """Writes the module files, the variables as terraform.tfvars.json, and the
    backend override into `work_dir`."""
    for name, content in module_files(inputs_secret).items():
        (work_dir / name).write_bytes(content)
    raw = (inputs_secret.get("data") or {}).get(VARIABLES_KEY)
    variables = base64.b64decode(raw) if raw is not None else b"{}"
    (work_dir / TFVARS_FILE).write_bytes(variables)
    (work_dir / BACKEND_OVERRIDE_FILE).write_text(BACKEND_OVERRIDE)
