"""Rendering the durable inputs Secret into a work directory tofu can run in.

Layout: tofu runs in `<work>/root/`, which also holds the local-backend override and
the state file. With contract inputs (`contract.json`), root/ is the generated root
(controller/core/contract/root.py) and the object's module files go, unchanged, into
the sibling `<work>/module/`, which the root calls as `../module`. Without them (an
object outside Cluster API) the module files are the root themselves, in root/.

The module files come from the Secret's `module.<file>` keys or, when it names a module
image (`image`), from the image the runner's pod mounts (controller/runner/module_image.py)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from pathlib import Path

import orjson

from controller.core.contract.roles import UnknownKind, contract_for_kind
from controller.core.contract.root import MODULE_DIR, ROOT_DIR, InputsMismatch
from controller.core.contract.root import render as root_of
from controller.core.contract.variables import VariablesRefused
from controller.runner.module_image import ImageLayoutError, copy_module
from runtime.jsonobj import Json

MODULE_PREFIX = "module."
VARIABLES_KEY = "variables.json"
CONTRACT_KEY = "contract.json"
IMAGE_KEY = "image"
TFVARS_FILE = "terraform.tfvars.json"
# The runner keeps state in its Secret, so tofu must use the local backend in
# the work directory whatever the module declares; an override file replaces
# the module's backend block, if it has one.
BACKEND_OVERRIDE_FILE = "_captf_backend_override.tf"
BACKEND_OVERRIDE = 'terraform {\n  backend "local" {\n    path = "terraform.tfstate"\n  }\n}\n'
_RESERVED = frozenset({TFVARS_FILE, BACKEND_OVERRIDE_FILE, "terraform.tfstate", "tfplan"})


class RenderError(ValueError):
    """The inputs Secret cannot be rendered: the message says why."""


class ImageRenderError(RenderError):
    """The module image's files could not be placed: the image breaks its contract."""


def root_dir(work: Path) -> Path:
    """The directory tofu runs in, made inside a fresh work directory."""
    root = work / ROOT_DIR
    root.mkdir(exist_ok=True)
    return root


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


def render(
    root: Path,
    inputs_secret: Json,
    *,
    kind: str = "",
    secret_variables: Iterable[str] = (),
    image_dir: str | None = None,
) -> None:
    """Writes the inputs into `root` (where tofu runs) and, with contract inputs, the
    module into its sibling module/; then the backend override into `root`.

    `kind` is the object's (its role's root is rendered); `secret_variables` are the user
    variables from Secrets, which the generated root declares sensitive; `image_dir` is
    where the pod mounts the module image, if it mounts one."""
    data = inputs_secret.get("data") or {}
    raw = data.get(VARIABLES_KEY)
    variables = base64.b64decode(raw) if raw is not None else b"{}"
    if CONTRACT_KEY not in data:
        _place_module(root, inputs_secret, image_dir)
        (root / TFVARS_FILE).write_bytes(variables)
    else:
        module = root.parent / MODULE_DIR
        module.mkdir(exist_ok=True)
        _place_module(module, inputs_secret, image_dir)
        generated = _root(data[CONTRACT_KEY], variables, kind, frozenset(secret_variables))
        for name, text in generated.items():
            (root / name).write_text(text)
    (root / BACKEND_OVERRIDE_FILE).write_text(BACKEND_OVERRIDE)


def _place_module(target: Path, inputs_secret: Json, image_dir: str | None) -> None:
    """The module's files into `target`: from the module image the inputs name, else
    from the Secret's `module.<file>` keys."""
    raw = (inputs_secret.get("data") or {}).get(IMAGE_KEY)
    if raw is None:
        for name, content in module_files(inputs_secret).items():
            (target / name).write_bytes(content)
        return
    try:
        reference = base64.b64decode(raw, validate=True).decode()
        copy_module(reference, image_dir, target, _RESERVED | {BACKEND_OVERRIDE_FILE})
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise RenderError(f"the inputs Secret's {IMAGE_KEY} is not text: {exc}") from None
    except (ImageLayoutError, OSError) as exc:
        raise ImageRenderError(str(exc)) from None


def _root(
    raw: str, variables: bytes, kind: str, secret_variables: frozenset[str]
) -> dict[str, str]:
    try:
        role = contract_for_kind(kind).role
        inputs = orjson.loads(base64.b64decode(raw, validate=True))
        users = orjson.loads(variables)
        return root_of(
            role, inputs, user_variables=users, secret_variables=secret_variables
        ).files()
    except (UnknownKind, InputsMismatch, VariablesRefused) as exc:
        raise RenderError(f"the generated root cannot be rendered: {exc}") from None
    except (binascii.Error, orjson.JSONDecodeError, AttributeError, TypeError) as exc:
        raise RenderError(f"the inputs Secret's {CONTRACT_KEY} is not JSON: {exc}") from None
