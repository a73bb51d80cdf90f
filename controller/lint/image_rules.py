"""The checks `captf lint image` runs on a module image's files and config, beside the
module checks (lint.py) it runs on the image's `/captf/module`.

The image is described as data (`ImageFacts`): every path of its filesystem after the
layers are applied, with its kind, mode and link target, its labels, its user, the
platform checked, and the providers the module requires. Reading a registry and
layers is someone else's (controller/image/module_read.py); here are only decisions.

Rule ids follow the public implementation's linter (`image/runtime-present` is
`image-runtime-present`). Paths are the image's, without the leading `/`."""

from __future__ import annotations

import enum
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from controller.core.contract.capacity import LABEL_CAPACITY, LABEL_NODE_INFO, label_problems
from controller.core.contract.roles import CONTRACT_VERSION, Role
from controller.lint.module_facts import Where
from controller.lint.rules import Finding, Rule, Severity

MODULE: Final = "captf/module"
RUNTIME: Final = "captf/runtime"
PROVIDERS: Final = "captf/providers"
# What the Job mounts over: anything the image ships there is shadowed.
RESERVED: Final = ("captf/work", "captf/bin", "captf/config", "var/run/captf/credentials")
MODULE_SUFFIXES: Final = (".tf", ".tf.json", ".tofu", ".tofu.json")
LABEL_CONTRACT: Final = "io.captf.contract"
LABEL_ROLE: Final = "io.captf.role"
LABEL_RUNTIME: Final = "io.captf.runtime"
LABEL_RUNTIME_VERSION: Final = "io.captf.runtime.version"
RUNTIMES: Final = ("tofu", "terraform")
# Shown per finding at most; the message says how many more.
SHOWN_PATHS: Final = 5
_MAX_LINKS: Final = 40
_ROOT_USERS: Final = frozenset({"", "root", "0"})
_PACKED = re.compile(r"terraform-provider-(?P<type>[^_]+)_(?P<version>[^_]+)_(?P<target>\w+)\.zip")

_E, _W = Severity.ERROR, Severity.WARNING
IMAGE_RULES: Final = {
    rule.id: rule
    for rule in (
        Rule("image-platform", _E, "the image is not for the platform asked for"),
        Rule("image-module-present", _E, "/captf/module holds no module file at its top"),
        Rule("image-module-link", _E, "a link under /captf/module ends outside it"),
        Rule("image-runtime-present", _E, "/captf/runtime is missing or not executable"),
        Rule("image-runtime-version", _W, "the runtime's name is not the runtime label's"),
        Rule("image-reserved-paths", _E, "files under a path the Job mounts over"),
        Rule("image-providers-absent", _W, "providers required but no mirror in the image"),
        Rule("image-providers-layout", _E, "an entry of /captf/providers is no mirror entry"),
        Rule("image-providers-complete", _E, "a required provider is not in the mirror"),
        Rule("image-label-role", _E, "io.captf.role is missing or names another role"),
        Rule("image-label-contract", _W, "io.captf.contract is missing or another version"),
        Rule("image-label-runtime", _E, "io.captf.runtime(.version) missing or unknown"),
        Rule("image-label-capacity", _E, "io.captf.capacity or io.captf.node-info malformed"),
        Rule("image-user-root", _W, "the image runs as root"),
    )
}


class Kind(enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    OTHER = "other"  # a device or a FIFO


@dataclass(frozen=True)
class Entry:
    kind: Kind
    mode: int = 0o644
    # A symbolic link's target, as written (absolute ones are the image's own root).
    target: str = ""


@dataclass(frozen=True)
class ImageFacts:
    # Every path after the layers are applied, parents included; no leading `/`.
    entries: Mapping[str, Entry]
    labels: Mapping[str, str] = field(default_factory=dict)
    user: str = ""
    # `os/arch`: the platform checked (the mirror must carry it).
    platform: str = "linux/amd64"
    # Why the image is not for a platform asked for explicitly; None when it is.
    platform_problem: str | None = None
    # The providers the module and its local modules require: `host/namespace/type`.
    required_providers: frozenset[str] = frozenset()


Check = Callable[[ImageFacts, Role], Iterator[Finding]]


def _finding(
    rule: str, message: str, path: str | None = None, severity: Severity | None = None
) -> Finding:
    where = Where("/" + path) if path is not None else None
    return Finding(rule, severity or IMAGE_RULES[rule].severity, message, where)


def resolve(entries: Mapping[str, Entry], path: str) -> str | None:
    """The path `path` ends at once every symbolic link on the way is followed inside
    the image (an absolute target starts again at the image's root, `..` stops at it);
    None when a link is broken or links loop."""
    parts = [p for p in path.split("/") if p]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        here = "/".join([*done, part])
        entry = entries.get(here)
        if entry is None:
            return None
        if entry.kind is Kind.SYMLINK:
            hops += 1
            if hops > _MAX_LINKS:
                return None
            target = entry.target
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        done.append(part)
    return "/".join(done)


def _under(entries: Mapping[str, Entry], top: str) -> list[str]:
    prefix = top + "/"
    return sorted(path for path in entries if path.startswith(prefix))


def _listed(paths: list[str]) -> str:
    shown = ", ".join("/" + path for path in paths[:SHOWN_PATHS])
    more = len(paths) - SHOWN_PATHS
    return f"{shown} and {more} more" if more > 0 else shown


def _platform(image: ImageFacts, role: Role) -> Iterator[Finding]:
    if image.platform_problem is not None:
        yield _finding("image-platform", image.platform_problem)


def _module_present(image: ImageFacts, role: Role) -> Iterator[Finding]:
    entries = image.entries
    top = entries.get(MODULE)
    if top is None or top.kind is not Kind.DIR:
        yield _finding("image-module-present", "no /captf/module directory: the module goes there")
        return
    files = [
        path
        for path in _under(entries, MODULE)
        if "/" not in path[len(MODULE) + 1 :] and path.endswith(MODULE_SUFFIXES)
    ]
    if not any(_is_file(entries, path) for path in files):
        yield _finding(
            "image-module-present",
            "/captf/module has no .tf, .tf.json, .tofu or .tofu.json file at its top",
            MODULE,
        )


def _module_link(image: ImageFacts, role: Role) -> Iterator[Finding]:
    entries = image.entries
    for path in _under(entries, MODULE):
        if entries[path].kind is not Kind.SYMLINK:
            continue
        end = resolve(entries, path)
        inside = end is not None and end.startswith(MODULE + "/")
        if not inside or entries[end or ""].kind is not Kind.FILE:
            yield _finding(
                "image-module-link",
                f"links to {entries[path].target}, which is no file inside /captf/module",
                path,
            )


def _runtime_present(image: ImageFacts, role: Role) -> Iterator[Finding]:
    entries = image.entries
    if RUNTIME not in entries:
        yield _finding("image-runtime-present", "no /captf/runtime: the runtime binary goes there")
        return
    end = resolve(entries, RUNTIME)
    entry = entries.get(end) if end is not None else None
    if entry is None:
        target = entries[RUNTIME].target
        yield _finding("image-runtime-present", f"links to {target}, not in the image", RUNTIME)
    elif entry.kind is not Kind.FILE:
        yield _finding("image-runtime-present", f"is a {entry.kind.value}, not a file", RUNTIME)
    elif not entry.mode & 0o111:
        yield _finding(
            "image-runtime-present", f"is not executable (mode {entry.mode:04o})", RUNTIME
        )


def _runtime_version(image: ImageFacts, role: Role) -> Iterator[Finding]:
    label = image.labels.get(LABEL_RUNTIME)
    end = resolve(image.entries, RUNTIME)
    if label not in RUNTIMES or end is None:
        return
    name = posixpath.basename(end)
    other = next((r for r in RUNTIMES if r != label and name.startswith(r)), None)
    if other is not None:
        yield _finding(
            "image-runtime-version",
            f"the runtime is /{end}, which looks like {other}, but {LABEL_RUNTIME} is {label}",
            RUNTIME,
        )


def _reserved_paths(image: ImageFacts, role: Role) -> Iterator[Finding]:
    entries = image.entries
    for top in RESERVED:
        found = _under(entries, top)
        if top in entries and entries[top].kind is not Kind.DIR:
            found.insert(0, top)
        if found:
            yield _finding(
                "image-reserved-paths",
                f"the Job mounts over /{top}, hiding what the image has there: {_listed(found)}",
                top,
            )


def _mirror_entry(relative: tuple[str, ...], entry: Entry) -> bool:
    """Whether a path inside the mirror belongs to the packed layout
    (`HOST/NS/TYPE/terraform-provider-TYPE_VERSION_TARGET.zip`, `index.json`,
    `VERSION.json`) or the unpacked one (`HOST/NS/TYPE/VERSION/TARGET/...`)."""
    depth = len(relative)
    if entry.kind is Kind.DIR:
        return True
    if depth == 4:
        name = relative[3]
        packed = _PACKED.fullmatch(name)
        return bool(packed and packed["type"] == relative[2]) or name.endswith(".json")
    return depth >= 6


def _providers(image: ImageFacts) -> Entry | None:
    end = resolve(image.entries, PROVIDERS)
    return image.entries.get(end) if end is not None else None


def _providers_layout(image: ImageFacts, role: Role) -> Iterator[Finding]:
    if _providers(image) is None:
        return
    wrong = []
    for path in _under(image.entries, PROVIDERS):
        relative = tuple(path[len(PROVIDERS) + 1 :].split("/"))
        if not _mirror_entry(relative, image.entries[path]):
            wrong.append(path)
    if wrong:
        yield _finding(
            "image-providers-layout",
            f"not a provider mirror entry (HOST/NAMESPACE/TYPE/...): {_listed(wrong)}",
            PROVIDERS,
        )


def mirrored(entries: Mapping[str, Entry], address: str, target: str) -> bool:
    """Whether the mirror holds `address` (`host/namespace/type`) for `target`
    (`linux_amd64`), packed or unpacked, its files resolving inside the image."""
    top = f"{PROVIDERS}/{address}"
    kind = address.rsplit("/", 1)[-1]
    for path in _under(entries, top):
        rest = path[len(top) + 1 :].split("/")
        packed = len(rest) == 1 and _PACKED.fullmatch(rest[0])
        if packed and packed["type"] == kind and packed["target"] == target:
            return _is_file(entries, path)
        if len(rest) >= 3 and rest[1] == target and _is_file(entries, path):
            return True
    return False


def _is_file(entries: Mapping[str, Entry], path: str) -> bool:
    end = resolve(entries, path)
    return end is not None and entries[end].kind is Kind.FILE


def _providers_complete(image: ImageFacts, role: Role) -> Iterator[Finding]:
    required = sorted(image.required_providers)
    if not required:
        return
    if _providers(image) is None:
        yield _finding(
            "image-providers-absent",
            f"the module requires {', '.join(required)} and the image has no"
            " /captf/providers mirror: init needs a registry when the Job runs",
        )
        return
    target = image.platform.replace("/", "_")
    for address in required:
        if not mirrored(image.entries, address, target):
            yield _finding(
                "image-providers-complete",
                f"the module requires {address}, and the mirror has no package of it for {target}",
                PROVIDERS,
            )


def _label_role(image: ImageFacts, role: Role) -> Iterator[Finding]:
    label = image.labels.get(LABEL_ROLE)
    if label is None:
        yield _finding(
            "image-label-role", f"no {LABEL_ROLE} label: set it to {role.value}", severity=_W
        )
    elif label != role.value:
        yield _finding(
            "image-label-role", f"{LABEL_ROLE} is {label!r}, but the role is {role.value}"
        )


def _label_contract(image: ImageFacts, role: Role) -> Iterator[Finding]:
    label = image.labels.get(LABEL_CONTRACT)
    if label is None:
        yield _finding(
            "image-label-contract", f"no {LABEL_CONTRACT} label: set it to {CONTRACT_VERSION}"
        )
    elif label != CONTRACT_VERSION:
        yield _finding(
            "image-label-contract",
            f"{LABEL_CONTRACT} is {label!r}, but the contract is {CONTRACT_VERSION}",
        )


def _label_runtime(image: ImageFacts, role: Role) -> Iterator[Finding]:
    runtime = image.labels.get(LABEL_RUNTIME)
    if runtime is None:
        yield _finding("image-label-runtime", f"no {LABEL_RUNTIME} label", severity=_W)
    elif runtime not in RUNTIMES:
        yield _finding(
            "image-label-runtime",
            f"{LABEL_RUNTIME} is {runtime!r}, not one of {', '.join(RUNTIMES)}",
        )
    if not image.labels.get(LABEL_RUNTIME_VERSION):
        yield _finding("image-label-runtime", f"no {LABEL_RUNTIME_VERSION} label", severity=_W)


def _label_capacity(image: ImageFacts, role: Role) -> Iterator[Finding]:
    """The scale-from-zero labels, when present, are of the contract's shape (an error:
    the template's status would show CapacityLabelInvalid). On a cluster image they
    mean nothing (a warning); a pool's template reads them as a machine's does."""
    for problem in label_problems(image.labels):
        yield _finding("image-label-capacity", problem)
    present = [k for k in (LABEL_CAPACITY, LABEL_NODE_INFO) if k in image.labels]
    if present and role == Role.CLUSTER:
        message = (
            f"{', '.join(present)} on a cluster image: only machine and pool templates read it"
        )
        yield _finding("image-label-capacity", message, severity=_W)


def _user_root(image: ImageFacts, role: Role) -> Iterator[Finding]:
    user = image.user.split(":", 1)[0].strip()
    if user in _ROOT_USERS:
        shown = f"user {image.user!r}" if image.user else "no user (root)"
        yield _finding(
            "image-user-root",
            f"the image runs as {shown}: set a numeric non-root USER for the restricted"
            " Pod Security profile",
        )


CHECKS: tuple[Check, ...] = (
    _platform,
    _module_present,
    _module_link,
    _runtime_present,
    _runtime_version,
    _reserved_paths,
    _providers_layout,
    _providers_complete,
    _label_role,
    _label_contract,
    _label_runtime,
    _label_capacity,
    _user_root,
)


def lint_image(image: ImageFacts, role: Role) -> list[Finding]:
    """Every image finding, image-wide ones first, then by path and rule."""
    found = [finding for check in CHECKS for finding in check(image, role)]
    return sorted(found, key=Finding.sort_key)
