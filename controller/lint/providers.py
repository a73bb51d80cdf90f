"""The providers a module requires, as OpenTofu installs them: `host/namespace/type`.

A module requires every provider its `required_providers` names, and those it uses
without naming: the local name of a `provider` block, of a resource's or data
source's `provider` argument, or the prefix of a resource type (`local_file` uses
`local`). A local name not in `required_providers` is `hashicorp/NAME` on the default
registry. The built-in `terraform` provider (`terraform_data`) is never installed, so
never required. Local modules (a `source` of `./...` or `../...` inside the module's
directory) are read the same way, each with its own `required_providers`; remote ones
are not fetched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from controller.lint.module_files import Block, module_blocks

OPENTOFU_REGISTRY: Final = "registry.opentofu.org"
TERRAFORM_REGISTRY: Final = "registry.terraform.io"
BUILTIN: Final = "terraform"
DEFAULT_NAMESPACE: Final = "hashicorp"
_LOCAL_SOURCES: Final = ("./", "../")


def required_providers(directory: Path, *, host: str = OPENTOFU_REGISTRY) -> frozenset[str]:
    """Every provider the module in `directory` and its local modules require. `host`:
    the registry a source without one means (OpenTofu's, Terraform's)."""
    root = directory.resolve()
    found: set[str] = set()
    seen: set[Path] = set()
    queue = [root]
    while queue:
        current = queue.pop()
        if current in seen:
            continue
        seen.add(current)
        blocks = module_blocks(current)
        found |= _module_providers(blocks, host)
        queue += _local_modules(blocks, current, root)
    return frozenset(found)


def _module_providers(blocks: list[Block], host: str) -> set[str]:
    sources: dict[str, str] = {}
    for block in blocks:
        if block.type == "terraform":
            for body in _bodies(block.content):
                for required in _bodies(body.get("required_providers")):
                    for name, spec in required.items():
                        source = spec.get("source") if isinstance(spec, dict) else None
                        sources[name] = source if isinstance(source, str) else ""
    used = set(sources) | set(_used_names(blocks))
    return {
        address
        for name in used
        if name != BUILTIN
        and (address := _address(sources.get(name) or f"{DEFAULT_NAMESPACE}/{name}", host))
    }


def _used_names(blocks: list[Block]) -> Iterator[str]:
    for block in blocks:
        if block.type == "provider":
            for body in _bodies(block.content):
                yield from body
        elif block.type in ("resource", "data"):
            for body in _bodies(block.content):
                for type_, instances in body.items():
                    yield type_.split("_", 1)[0]
                    yield from _provider_arguments(instances)


def _provider_arguments(instances: Any) -> Iterator[str]:
    for named in _bodies(instances):
        for each in named.values():
            for body in _bodies(each):
                value = body.get("provider")
                if isinstance(value, str):
                    yield value.removeprefix("${").removesuffix("}").split(".", 1)[0]


def _local_modules(blocks: list[Block], current: Path, root: Path) -> Iterator[Path]:
    """The directories of the local modules called, kept inside the root: a call out of
    it is not followed (the image would not hold it)."""
    for block in blocks:
        if block.type != "module":
            continue
        for body in _bodies(block.content):
            for call in body.values():
                for each in _bodies(call):
                    source = each.get("source")
                    if not isinstance(source, str) or not source.startswith(_LOCAL_SOURCES):
                        continue
                    called = (current / source).resolve()
                    if called.is_relative_to(root) and called.is_dir():
                        yield called


def _address(source: str, host: str) -> str | None:
    parts = source.lower().split("/")
    if len(parts) == 2:
        parts = [host, *parts]
    if len(parts) != 3 or not all(parts):
        return None
    return "/".join(parts)


def _bodies(content: Any) -> Iterator[dict[str, Any]]:
    for each in content if isinstance(content, list) else [content]:
        if isinstance(each, dict):
            yield each
