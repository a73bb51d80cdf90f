"""`captf lint module DIR --role ROLE`: a role module's files against its role's contract,
offline, before it is published.

Findings go to standard output, one line each (`path:line: severity rule: message`), or
as one JSON document with `--json`; a summary goes to standard error. Exit status: 0 when
no finding is an error (warnings pass, unless `--strict`), 1 when one is, 2 when the
module cannot be read or parsed (the reason, with its file and line, on standard error)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.core.contract.roles import CONTRACT_VERSION, Role, contract_of
from controller.lint.module_files import ModuleUnreadable, read_module
from controller.lint.rules import Finding, Severity, has_errors, lint

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_UNREADABLE = 2


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    role = Role(args.role)
    try:
        facts = read_module(directory)
    except ModuleUnreadable as err:
        where = _place(directory, err.file, err.line)
        print(f"captf lint: {where}: {err.message}", file=sys.stderr)
        return EXIT_UNREADABLE
    findings = lint(facts, contract_of(role))
    failed = has_errors(findings, strict=args.strict)
    if args.json:
        print(json.dumps(report(directory, role, findings, failed=failed), indent=2))
    else:
        for finding in findings:
            print(line_of(directory, finding))
    print(f"captf lint: {directory} ({role.value}): {counts(findings)}", file=sys.stderr)
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def _place(directory: Path, file: str | None, line: int | None) -> str:
    path = str(directory / file) if file else str(directory)
    return f"{path}:{line}" if line else path


def line_of(directory: Path, finding: Finding) -> str:
    where = finding.where
    place = _place(directory, where.file if where else None, where.line if where else None)
    return f"{place}: {finding.severity.value} {finding.rule}: {finding.message}"


def count(findings: list[Finding], severity: Severity) -> int:
    return sum(finding.severity is severity for finding in findings)


def counts(findings: list[Finding]) -> str:
    errors, warnings = count(findings, Severity.ERROR), count(findings, Severity.WARNING)
    return f"{errors} error(s), {warnings} warning(s)"


def report(directory: Path, role: Role, findings: list[Finding], *, failed: bool) -> Any:
    """The `--json` document. `file` and `line` are null for a finding about the module
    as a whole; `line` is null in a `.tf.json` file."""
    return {
        "module": str(directory),
        "role": role.value,
        "contract": CONTRACT_VERSION,
        **findings_report(findings, lambda file: str(directory / file), failed=failed),
    }


def findings_report(
    findings: list[Finding], file_of: Callable[[str], str], *, failed: bool
) -> dict[str, Any]:
    """The findings and the summary of a `--json` document, as every `captf lint` writes
    them; `file_of` turns a finding's file into the path shown."""
    return {
        "findings": [
            {
                "rule": finding.rule,
                "severity": finding.severity.value,
                "file": file_of(finding.where.file) if finding.where else None,
                "line": finding.where.line if finding.where else None,
                "message": finding.message,
            }
            for finding in findings
        ],
        "summary": {
            "errors": count(findings, Severity.ERROR),
            "warnings": count(findings, Severity.WARNING),
            "failed": failed,
        },
    }
