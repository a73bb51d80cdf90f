"""A module directory's `.tf` and `.tf.json` files, read into `ModuleFacts`.

Only the directory's own files are read, as Terraform loads a module: no subdirectory,
no module it calls. HCL is parsed with python-hcl2, which gives the values of a file
but no positions; its parse tree gives each top-level block's line, and a file's blocks
of one type come out of both in source order, so the n-th `variable` value is the
n-th `variable` block. JSON syntax keeps no lines worth the trouble: findings in a
`.tf.json` file name the file alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2
from hcl2.utils import SerializationOptions
from lark import Tree
from lark.exceptions import UnexpectedInput

from controller.lint.module_facts import (
    ModuleFacts,
    Output,
    ProviderArgument,
    Variable,
    Where,
)

HCL_SUFFIX = ".tf"
JSON_SUFFIX = ".tf.json"

# Plain values, not HCL re-rendered: strings keep their quotes (so a literal tells itself
# from an expression, which comes as `${...}`), comments are left out.
_VALUES = SerializationOptions(with_comments=False, explicit_blocks=False)

_VAR_REFERENCE = re.compile(r"\bvar\.([A-Za-z_][A-Za-z0-9_-]*)")


class ModuleUnreadable(Exception):
    """A module that cannot be linted: no such directory, no module file, or a file
    that does not read or parse. `file` and `line` say where, when known."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line


@dataclass(frozen=True)
class _Block:
    """One top-level block, or in JSON one top-level key, as the parser gave it."""

    type: str
    content: Any
    where: Where


@dataclass(frozen=True)
class _Syntax:
    # Whether a value is a non-empty string written out in the source.
    literal: Callable[[Any], bool]
    # A block label as the syntax spells it, made a plain name.
    label: Callable[[str], str]


def module_files(directory: Path) -> list[Path]:
    """The module's files, sorted by name (Terraform's loading order)."""
    if not directory.is_dir():
        raise ModuleUnreadable("not a directory")
    found = sorted(
        path
        for path in directory.iterdir()
        if path.is_file() and path.name.endswith((HCL_SUFFIX, JSON_SUFFIX))
    )
    if not found:
        raise ModuleUnreadable(f"no {HCL_SUFFIX} or {JSON_SUFFIX} file in the directory")
    return found


def read_module(directory: Path) -> ModuleFacts:
    facts = _Facts()
    for path in module_files(directory):
        text = _text(path)
        if path.name.endswith(JSON_SUFFIX):
            facts.add(_json_blocks(path.name, text), _JSON)
        else:
            facts.add(_hcl_blocks(path.name, text), _HCL)
    return facts.done()


@dataclass(frozen=True)
class Block:
    """A top-level block with its labels and string values made plain: HCL's quotes
    taken off literals, expressions left as python-hcl2 writes them (`${...}`)."""

    type: str
    content: Any
    file: str


def module_blocks(directory: Path) -> list[Block]:
    """Every top-level block of the module's files, in loading order."""
    found: list[Block] = []
    for path in module_files(directory):
        text = _text(path)
        is_json = path.name.endswith(JSON_SUFFIX)
        blocks = _json_blocks(path.name, text) if is_json else _hcl_blocks(path.name, text)
        syntax = _JSON if is_json else _HCL
        found += [Block(b.type, _plain(b.content, syntax), path.name) for b in blocks]
    return found


def _plain(value: Any, syntax: _Syntax) -> Any:
    if isinstance(value, dict):
        return {syntax.label(key): _plain(item, syntax) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item, syntax) for item in value]
    if isinstance(value, str) and syntax.literal(value):
        return syntax.label(value)
    return value


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ModuleUnreadable(f"not UTF-8 text ({err.reason})", path.name) from None
    except OSError as err:
        raise ModuleUnreadable(f"cannot read: {err.strerror}", path.name) from None


def _hcl_blocks(name: str, text: str) -> list[_Block]:
    try:
        tree = hcl2.parses_to_tree(text)
        values = hcl2.serialize(
            hcl2.transform(tree, discard_comments=True), serialization_options=_VALUES
        )
    except UnexpectedInput as err:
        raise ModuleUnreadable(_syntax_error(err), name, err.line) from None
    lines = _block_lines(tree)
    blocks: list[_Block] = []
    for type_, entries in values.items():
        if not isinstance(entries, list):
            continue  # a top-level attribute: Terraform refuses it; nothing to check
        at = lines.get(type_, [])
        for index, entry in enumerate(entries):
            line = at[index] if index < len(at) else None
            blocks.append(_Block(type_, entry, Where(name, line)))
    return blocks


def _syntax_error(err: UnexpectedInput) -> str:
    token = getattr(err, "token", None)
    if token is not None:
        if token.type == "$END":
            return "not valid HCL: unexpected end of file"
        shown = str(token).strip().split("\n", 1)[0][:40]
        return f"not valid HCL: unexpected {shown!r}"
    char = getattr(err, "char", None)
    if char is not None:
        return f"not valid HCL: unexpected character {char!r}"
    return "not valid HCL"


def _block_lines(tree: Tree[Any]) -> dict[str, list[int]]:
    """Each top-level block type's lines, in source order."""
    lines: dict[str, list[int]] = {}
    body = tree.children[0] if tree.children else None
    if not isinstance(body, Tree):
        return lines
    for child in body.children:
        if isinstance(child, Tree) and child.data == "block":
            identifier = child.children[0]
            type_ = str(identifier.children[0]) if isinstance(identifier, Tree) else ""
            lines.setdefault(type_, []).append(child.meta.line)
    return lines


def _json_blocks(name: str, text: str) -> list[_Block]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise ModuleUnreadable(f"not valid JSON: {err.msg}", name, err.lineno) from None
    if not isinstance(document, dict):
        raise ModuleUnreadable("not a JSON object at the top", name, 1)
    return [_Block(type_, content, Where(name)) for type_, content in document.items()]


def _hcl_literal(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) > 2
        and value.startswith('"')
        and value.endswith('"')
        and "${" not in value
    )


def _json_literal(value: Any) -> bool:
    return isinstance(value, str) and value != "" and "${" not in value


_HCL = _Syntax(literal=_hcl_literal, label=lambda label: label.strip('"'))
_JSON = _Syntax(literal=_json_literal, label=lambda label: label)


def _labelled(content: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (label, body) pairs of a one-label block type's content: in HCL one
    `{label: body}` per block, in JSON `{label: body}` for many, or lists of either."""
    if isinstance(content, list):
        for item in content:
            yield from _labelled(item)
    elif isinstance(content, dict):
        for label, body in content.items():
            for each in body if isinstance(body, list) else [body]:
                if isinstance(each, dict):
                    yield label, each


def _bodies(content: Any) -> Iterator[dict[str, Any]]:
    """The bodies of an unlabelled block type's content (one, or a JSON list)."""
    for each in content if isinstance(content, list) else [content]:
        if isinstance(each, dict):
            yield each


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _type_text(value: Any) -> str | None:
    """A type constraint's expression text, without the `${...}` python-hcl2 puts around
    an expression that is not a bare name, or the quotes of the pre-0.12 syntax."""
    if value is None:
        return None
    text = str(value).strip()
    if text.startswith("${") and text.endswith("}"):
        text = text[2:-1].strip()
    return text.strip('"')


@dataclass
class _Facts:
    variables: list[Variable] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    backends: list[Where] = field(default_factory=list)
    clouds: list[Where] = field(default_factory=list)
    provider_arguments: list[ProviderArgument] = field(default_factory=list)
    referenced: set[str] = field(default_factory=set)

    def add(self, blocks: list[_Block], syntax: _Syntax) -> None:
        for block in blocks:
            if block.type == "variable":
                self._variables(block, syntax)
                continue
            self.referenced.update(
                match for text in _strings(block.content) for match in _VAR_REFERENCE.findall(text)
            )
            if block.type == "output":
                for label, _ in _labelled(block.content):
                    self.outputs.append(Output(syntax.label(label), block.where))
            elif block.type == "terraform":
                self._terraform(block)
            elif block.type == "provider":
                for label, body in _labelled(block.content):
                    self._provider(syntax.label(label), body, block.where, syntax)

    def _variables(self, block: _Block, syntax: _Syntax) -> None:
        for label, body in _labelled(block.content):
            self.variables.append(
                Variable(
                    name=syntax.label(label),
                    where=block.where,
                    type=_type_text(body.get("type")),
                    has_default="default" in body,
                    sensitive=body.get("sensitive") is True,
                )
            )

    def _terraform(self, block: _Block) -> None:
        for body in _bodies(block.content):
            if "backend" in body:
                self.backends.append(block.where)
            if "cloud" in body:
                self.clouds.append(block.where)

    def _provider(self, provider: str, body: Any, where: Where, syntax: _Syntax) -> None:
        """Every argument at every depth: credentials also hide in nested blocks
        (`assume_role { ... }`) and object values."""
        items = body.items() if isinstance(body, dict) else ()
        for name, value in items:
            if isinstance(value, dict | list):
                for nested in value if isinstance(value, list) else [value]:
                    self._provider(provider, nested, where, syntax)
                continue
            self.provider_arguments.append(
                ProviderArgument(provider, str(name), syntax.literal(value), where)
            )

    def done(self) -> ModuleFacts:
        return ModuleFacts(
            variables=tuple(self.variables),
            outputs=tuple(self.outputs),
            backends=tuple(self.backends),
            clouds=tuple(self.clouds),
            provider_arguments=tuple(self.provider_arguments),
            referenced=frozenset(self.referenced),
        )
