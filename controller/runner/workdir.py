"""Rendering the durable inputs Secret into a work directory tofu can run in.

Layout: tofu runs in `<work>/root/`, which also holds the local-backend override and
the state file. With contract inputs (`contract.json`), root/ is the generated root
(controller/core/contract/root.py) and the object's module files go, unchanged, into
the sibling `<work>/module/`, which the root calls as `../module`. Without them (an
object outside Cluster API) the module files are the root themselves, in root/.

The module files come from the Secret's `module.<file>` keys or, when it names a module
image (`image`), from the image the runner's pod mounts (controller/runner/module_image.py)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from controller.core.contract.roles import UnknownKind, contract_for_kind
from controller.core.contract.root import MODULE_DIR, ROOT_DIR, InputsMismatch
from controller.core.contract.root import render as root_of
from controller.core.contract.variables import VariablesRefused
from controller.core.spec import inputs_secret as inputs_secret_codec
from controller.core.spec.inputs_secret import (
    MODULE_PREFIX,
    InputsData,
    InputsSecretError,
    canonical_json,
)
from controller.runner.module_image import ImageLayoutError, copy_module
from runtime.jsonobj import Json

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


def carried(inputs_secret: Json) -> InputsData:
    """What the inputs Secret carries (controller/core/spec/inputs_secret.py, the one
    codec), or RenderError saying why it is malformed."""
    try:
        return inputs_secret_codec.decode(inputs_secret.get("data"))
    except InputsSecretError as exc:
        raise RenderError(str(exc)) from None


def module_files(inputs: InputsData) -> dict[str, bytes]:
    """File name -> content: the module's files, none of them named as a file the runner
    writes beside them."""
    for name in inputs.module:
        if name in _RESERVED:
            raise RenderError(f"module file name {name!r} is not allowed")
    if not inputs.module:
        raise RenderError(f"the inputs Secret has no {MODULE_PREFIX}<file> keys")
    return {name: text.encode() for name, text in inputs.module.items()}


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
    inputs = carried(inputs_secret)
    if inputs.contract is None:
        _place_module(root, inputs, image_dir)
        (root / TFVARS_FILE).write_bytes(canonical_json(inputs.variables))
    else:
        module = root.parent / MODULE_DIR
        module.mkdir(exist_ok=True)
        _place_module(module, inputs, image_dir)
        generated = _root(inputs.contract, inputs.variables, kind, frozenset(secret_variables))
        for name, text in generated.items():
            (root / name).write_text(text)
    (root / BACKEND_OVERRIDE_FILE).write_text(BACKEND_OVERRIDE)


def _place_module(target: Path, inputs: InputsData, image_dir: str | None) -> None:
    """The module's files into `target`: from the module image the inputs name, else
    from the Secret's `module.<file>` keys."""
    if inputs.image is None:
        for name, content in module_files(inputs).items():
            (target / name).write_bytes(content)
        return
    try:
        copy_module(inputs.image, image_dir, target, _RESERVED | {BACKEND_OVERRIDE_FILE})
    except (ImageLayoutError, OSError) as exc:
        raise ImageRenderError(str(exc)) from None


def _root(
    contract: Json, variables: Json, kind: str, secret_variables: frozenset[str]
) -> dict[str, str]:
    try:
        role = contract_for_kind(kind).role
        return root_of(
            role, contract, user_variables=variables, secret_variables=secret_variables
        ).files()
    except (UnknownKind, InputsMismatch, VariablesRefused) as exc:
        raise RenderError(f"the generated root cannot be rendered: {exc}") from None
