"""YAML read as the API's JSON: the reader of `captf decide` snapshot files.

kubectl sends YAML to the API server as JSON, so a scalar that looks like a time stays a
string (JSON has no time type): a variable such as `date: 2026-01-01` hashes as the API
would send it, and so does a clock time such as `10:30` (no YAML 1.1 base-60 numbers).

A file is untrusted input that must be answered within a second or two. Aliases are
refused: the API never returns one (JSON has none), and aliases are how a 15 KB file
becomes gigabytes once expanded. libyaml's parser is used where PyYAML was built with
it (a 5 MB snapshot reads several times faster); scalars are resolved in Python by the
same rules with either parser, so a file reads the same either way."""

from __future__ import annotations

import re

import yaml

try:
    from yaml import CSafeLoader as _FastSafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _FastSafeLoader  # type: ignore[assignment]


def _api_resolver(tag: str, rx: re.Pattern[str]) -> tuple[str, re.Pattern[str]] | None:
    if tag == "tag:yaml.org,2002:timestamp":
        return None
    if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
        # No base-60 numbers: `start: 10:30` is the string kubectl would send, not 630.
        return tag, re.compile("(?!.*:)" + rx.pattern, rx.flags)
    return tag, rx


_RESOLVERS = {
    first: [r for tag, rx in resolvers if (r := _api_resolver(tag, rx)) is not None]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class FastLoader(_FastSafeLoader):
    """libyaml's parser (when present) with the API's scalar rules."""

    yaml_implicit_resolvers = _RESOLVERS


class PurePythonLoader(yaml.SafeLoader):
    """PyYAML's own parser with the same rules: the fallback, and the reference."""

    yaml_implicit_resolvers = _RESOLVERS


Loader = type[FastLoader] | type[PurePythonLoader]


# How many nodes aliases may add to a document when expanded. A hand-made snapshot
# dumped by PyYAML shares a repeated mapping as `&id001`/`*id001` (a few nodes); the
# bomb `a: &a [x, x]`, `b: &b [*a, *a]`, ... adds millions. Work after reading is
# proportional to the expanded size, so this bounds it at the file's size plus this.
MAX_ALIAS_EXPANSION = 100_000


class AliasRefused(yaml.YAMLError):
    """Aliases that expand beyond MAX_ALIAS_EXPANSION, or an alias inside its own anchor."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"a YAML alias at line {line} {why}")
        self.line = line
        self.why = why


def load(text: str, loader: Loader = FastLoader) -> object:
    """The one YAML document in `text`, as the API's JSON; AliasRefused for aliases beyond
    the bound, another yaml.YAMLError for what is not YAML.

    The node graph is composed unexpanded (an alias is the same node object again), so
    its expanded size is counted on the graph, before anything is expanded."""
    parser = loader(text)
    try:
        node = parser.get_single_node()
        if node is None:
            return None
        if "*" in text and _MAYBE_ALIAS.search(text):
            _bound_aliases(node)
        return _construct(node, parser)
    finally:
        parser.dispose()


def load_all(text: str, loader: Loader = FastLoader) -> list[object]:
    """Every document in `text` (`---` apart), each as `load` reads one."""
    parser = loader(text)
    found: list[object] = []
    try:
        while parser.check_node():
            node = parser.get_node()
            if node is None:
                continue
            if "*" in text and _MAYBE_ALIAS.search(text):
                _bound_aliases(node)
            found.append(_construct(node, parser))
    finally:
        parser.dispose()
    return found


# Where an alias token could start: `*name` at the start of a line or after a space, a
# flow indicator or a colon. A file without one has no alias (quoted text may match; that
# only costs the walk that looks for real aliases).
_MAYBE_ALIAS = re.compile(r"(?:^|[\s\[{,:])\*[^\s,\]}]", re.MULTILINE)
_STR, _MAP, _SEQ = (f"tag:yaml.org,2002:{t}" for t in ("str", "map", "seq"))


def _construct(node: yaml.Node, safe: yaml.constructor.SafeConstructor) -> object:
    """The Python value of a node graph: strings, mappings of scalar keys and sequences
    directly (nearly all of an API object, about ten times faster than the constructor's
    generic path); anything else (numbers, merge keys `<<`, other tags) by the safe
    constructor itself, so the result is the same either way."""
    if node.tag == _STR:
        return node.value
    if node.tag == _SEQ:
        return [_construct(item, safe) for item in node.value]
    if node.tag == _MAP and all(
        isinstance(key, yaml.ScalarNode) and key.tag == _STR for key, _ in node.value
    ):
        return {key.value: _construct(value, safe) for key, value in node.value}
    return safe.construct_object(node, deep=True)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def _bound_aliases(root: yaml.Node) -> None:
    """Refuses a graph whose tree (aliases expanded) has MAX_ALIAS_EXPANSION more nodes
    than the graph, or a cycle. Iterative post-order: no recursion limit to reach."""
    size: dict[int, int] = {}  # expanded size of each finished node
    open_: set[int] = set()  # nodes on the current path: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            if size[key] > len(size) + MAX_ALIAS_EXPANSION:
                raise AliasRefused(node.start_mark.line + 1, "expands the file too far")
            continue
        if key in size:
            continue
        if key in open_:
            raise AliasRefused(node.start_mark.line + 1, "refers to a node that contains it")
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
