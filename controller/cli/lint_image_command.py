"""`captf lint image REF --role ROLE`: a pushed module image against the image contract,
and its /captf/module against the role's contract, as `captf lint module` checks it.

The image is read from its registry with crane and the user's own registry logins
(the Docker config, as `docker` reads it); nothing else is reached. Findings go to
standard output, one line each (`path[:line]: severity rule: message`, the reference
for a finding about the image as a whole), or as one JSON document with `--json`; a
summary goes to standard error. Exit status: 0 clean (warnings pass unless
`--strict`), 1 an error (or a warning under `--strict`), 2 a reference that names no
registry host or does not parse (nothing is looked up on a default registry), an image
or module that cannot be read, 3 a registry that fails: no such image, credentials refused or
missing, no answer. The reason is one line on standard error, built from the
reference alone, never from what the registry or crane said."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from controller.cli.lint_command import counts, findings_report
from controller.core.contract.roles import CONTRACT_VERSION, Role, contract_of
from controller.dev.node.reference import BadReference, parse_reference
from controller.image.crane import CraneFailed, crane_path
from controller.image.fetch import Crane, FetchFailed, FetchKind
from controller.image.module_read import (
    ImageUnreadable,
    ReadImage,
    default_host,
    read_image,
    write_module,
)
from controller.lint.image_rules import MODULE, MODULE_SUFFIXES, ImageFacts, lint_image
from controller.lint.module_facts import Where
from controller.lint.module_files import ModuleUnreadable, read_module
from controller.lint.providers import required_providers
from controller.lint.rules import Finding, has_errors, lint

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_UNREADABLE = 2
EXIT_REGISTRY = 3

_REASONS = {
    FetchKind.NOT_FOUND: "no such image in the registry (repository, tag or digest unknown)",
    FetchKind.UNAUTHORIZED: "the registry wants credentials: none, or refused (docker login,"
    " or DOCKER_CONFIG naming a config.json with them)",
    FetchKind.UNREACHABLE: "the registry does not answer",
    FetchKind.FAILED: "the registry failed to serve the image",
}


class _Unreadable(Exception):
    """The module in the image cannot be read: the reason, with its place."""


def run(args: argparse.Namespace) -> int:
    reference, role = args.reference, Role(args.role)
    try:
        parse_reference(reference)
    except BadReference as bad:
        print(f"captf lint: {bad}", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        read = anyio.run(read_image, Crane(crane_path(), own_logins=True), reference, args.platform)
        findings = _findings(read, role)
    except FetchFailed as failed:
        reason = _REASONS.get(failed.kind) or str(failed)
        print(f"captf lint: {reference}: {failed.kind.value}: {reason}", file=sys.stderr)
        return EXIT_REGISTRY
    except CraneFailed as failed:
        print(f"captf lint: {failed}", file=sys.stderr)
        return EXIT_REGISTRY
    except (ImageUnreadable, _Unreadable) as err:
        print(f"captf lint: {reference}: {err}", file=sys.stderr)
        return EXIT_UNREADABLE
    failed_ = has_errors(findings, strict=args.strict)
    if args.json:
        print(json.dumps(report(reference, role, read, findings, failed=failed_), indent=2))
    else:
        for finding in findings:
            print(line_of(reference, finding))
    print(f"captf lint: {reference} ({role.value}): {counts(findings)}", file=sys.stderr)
    return EXIT_FINDINGS if failed_ else EXIT_CLEAN


def _findings(read: ReadImage, role: Role) -> list[Finding]:
    """The image's findings and its module's, the module read from its files in the image."""
    if read.platform_missing:
        return [f for f in lint_image(read.facts, role) if f.rule == "image-platform"]
    facts = read.facts
    module_findings: list[Finding] = []
    if any(path.count("/") == 2 and path.endswith(MODULE_SUFFIXES) for path in read.module):
        with tempfile.TemporaryDirectory(prefix="captf-lint-module-") as scratch:
            directory = Path(scratch)
            write_module(read.module, directory)
            try:
                module = read_module(directory)
                required = required_providers(directory, host=default_host(facts))
            except ModuleUnreadable as err:
                where = _in_module(Where(err.file, err.line) if err.file else None)
                place = where.file + (f":{where.line}" if where.line else "")
                raise _Unreadable(f"{place}: {err.message}") from None
        module_findings = [_moved(f) for f in lint(module, contract_of(role))]
        facts = dataclasses.replace(facts, required_providers=required)
    return sorted([*lint_image(facts, role), *module_findings], key=Finding.sort_key)


def _in_module(where: Where | None) -> Where:
    """A place in the module directory as a path in the image."""
    if where is None:
        return Where("/" + MODULE)
    return Where(f"/{MODULE}/{where.file}", where.line)


def _moved(finding: Finding) -> Finding:
    return dataclasses.replace(finding, where=_in_module(finding.where))


def line_of(reference: str, finding: Finding) -> str:
    where = finding.where
    place = reference if where is None else where.file + (f":{where.line}" if where.line else "")
    return f"{place}: {finding.severity.value} {finding.rule}: {finding.message}"


def report(
    reference: str, role: Role, read: ReadImage, findings: list[Finding], *, failed: bool
) -> Any:
    """The `--json` document: the image checked, then findings and summary as `lint module`
    writes them (`file` null for a finding about the image as a whole)."""
    facts: ImageFacts = read.facts
    return {
        "image": reference,
        "digest": read.digest,
        "platform": facts.platform,
        "role": role.value,
        "contract": CONTRACT_VERSION,
        "labels": dict(sorted(facts.labels.items())),
        **findings_report(findings, lambda file: file, failed=failed),
    }
