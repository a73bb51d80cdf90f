"""What a run reports beside its outcome: the error kind, a one-line summary, its steps.

The runner writes these into its result (controller/runner/result.py); the controller
checks them (controller/core/jobs/termination.py) and shows them as status.lastRun
(controller/core/plan/last_run.py). Both sides build a summary with `one_line`, so a
summary is never more than a short line with its values stripped, whoever wrote it.

A summary is built from patterns this module recognises, never copied from output: the
first OpenTofu `Error:` headline, with every quoted string, number-like and long token
replaced by `…`, cut to SUMMARY_LIMIT characters. What an operator needs from it is
which check or API call failed; the values are in the pod log, redacted."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum

import orjson

from controller.core.jobs.cloud_signals import SIGNALS, CloudKind
from runtime.jsonobj import Json

SUMMARY_LIMIT = 160
# A runtime version as `tofu version -json` prints it ("1.9.0", "1.10.0-beta1").
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+-]{0,39}")
STEP_NAME = re.compile(r"[a-z][a-z-]{0,31}")
# The steps our runner records (tofu's subcommands; `refresh` is apply -refresh-only).
# A metric labels any other name `other`: a runner image names its steps, and a label
# must not take any value it likes.
KNOWN_STEPS = frozenset({"init", "plan", "show", "apply", "refresh", "destroy", "output"})


class ErrorKind(StrEnum):
    """Why a run failed: a closed set (docs/runner.md). The runner names the step or the
    runner contract that failed; `timeout` and `contract` are the controller's own."""

    IMAGE_LAYOUT = "image-layout"  # the module image does not follow the image contract
    INPUTS = "inputs"  # the inputs Secret is missing, stale or cannot be rendered
    CREDENTIALS = "credentials"  # the credentials Secret cannot be read to redact it
    INIT = "init"
    PLAN = "plan"  # tofu plan, or reading the plan back (show)
    APPLY = "apply"
    REFRESH = "refresh"
    DESTROY = "destroy"
    OUTPUTS = "outputs"  # applied, but the outputs could not be read or written
    OUTPUTS_MISSING = "outputs-missing"  # the module lacks a contract output
    STATE = "state"  # the state Secret could not be read, saved or restored
    STATE_LOCK = "state-lock"  # tofu could not take the state lock
    TIMEOUT = "timeout"  # killed at the Job's activeDeadlineSeconds
    CONTRACT = "contract"  # the Job finished without a readable result of its own
    INTERNAL = "internal"  # an error of the runner itself
    # A step failed on the cloud's own transient error, a signal of cloud_signals' table
    # carried beside it: who should act is the account's operator, not the module's author.
    CLOUD_THROTTLED = CloudKind.THROTTLED.value
    CLOUD_CAPACITY = CloudKind.CAPACITY.value
    CLOUD_UNAVAILABLE = CloudKind.UNAVAILABLE.value
    CLOUD_CREDENTIALS = CloudKind.CREDENTIALS.value


ERROR_KINDS = frozenset(kind.value for kind in ErrorKind)
CLOUD_KINDS = frozenset(kind.value for kind in CloudKind)

# Where tofu's stderr says why it stopped: its diagnostic headlines.
_HEADLINE = re.compile(r"^[ \t]*(?:│[ \t]*)?Error:[ \t]*(\S.*)$", re.MULTILINE)
_LOCK = re.compile(r"Error acquiring the state lock|Error locking state", re.IGNORECASE)
# Values inside a headline: quoted strings, then anything long enough to be an id,
# a key or an address, then numbers. Each is linear in the line: a `"` left open runs to
# the end of the line (so no later `"` scans it again), and a word is one run of word
# characters, judged by `_token` (a pattern `word*[0-9...]word*` would rescan a run
# without digits from each of its characters).
_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"?|'[^']*'|`[^`]*`")
_TOKEN = re.compile(r"[A-Za-z0-9+/=_.:@-]+")
_VALUE_CHAR = re.compile(r"[0-9+/=_@]")
_LONG = re.compile(r"[A-Za-z0-9+/=_.:@-]{24,}")
_PRODUCT = re.compile(r"[A-Za-z]{1,4}[0-9]")
_SPACES = re.compile(r"\s+")
ELLIPSIS = "…"


def headline(stderr: str) -> str | None:
    """The first `Error:` headline in tofu's stderr, as printed; None if there is none.
    Its values go only once it is redacted (`one_line`): stripping first could cut a
    secret value apart and leave a piece the redactor no longer knows."""
    found = _HEADLINE.search(stderr)
    return found.group(1).strip() if found else None


def is_lock_error(stderr: str) -> bool:
    return _LOCK.search(stderr) is not None


def one_line(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """`text`'s first line, values replaced by `…`, spaces collapsed, cut to `limit`."""
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    line = _QUOTED.sub(ELLIPSIS, line)
    line = _LONG.sub(ELLIPSIS, line)
    line = _TOKEN.sub(_token, line)
    line = _SPACES.sub(" ", line).strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + ELLIPSIS


def _token(found: re.Match[str]) -> str:
    # A word with digits or symbols in it is a value (an id, a size, an address), except
    # a short product name such as EC2 or S3, which says which API failed.
    word = found.group(0)
    if _VALUE_CHAR.search(word) is None or _PRODUCT.fullmatch(word.rstrip(".:")):
        return word
    return ELLIPSIS


def runtime_version(printed: bytes | str) -> str | None:
    """The version in `tofu version -json`'s output; None when it prints none."""
    try:
        parsed = orjson.loads(printed)
    except orjson.JSONDecodeError:
        return None
    version = parsed.get("terraform_version") if isinstance(parsed, dict) else None
    return version if valid_version(version) else None


def valid_version(value: object) -> bool:
    return isinstance(value, str) and _VERSION.fullmatch(value) is not None


def valid_step(value: object) -> bool:
    """{name, exitCode, seconds}: a short lowercase name, an int32, a non-negative number."""
    if not isinstance(value, Mapping) or set(value) != {"name", "exitCode", "seconds"}:
        return False
    name, code, seconds = value["name"], value["exitCode"], value["seconds"]
    return (
        isinstance(name, str)
        and STEP_NAME.fullmatch(name) is not None
        and isinstance(code, int)
        and not isinstance(code, bool)
        and -(2**31) <= code < 2**31
        and isinstance(seconds, int | float)
        and not isinstance(seconds, bool)
        and 0 <= seconds < 1e9
    )


def valid_error(value: object) -> bool:
    """{kind, summary?, outputs?, signal?}: a kind of the closed set, a short summary; a
    cloud kind with the signal of the table that gives that kind, and only then."""
    if not isinstance(value, Mapping) or value.get("kind") not in ERROR_KINDS:
        return False
    if not set(value) <= {"kind", "summary", "outputs", "signal"}:
        return False
    if (value["kind"] in CLOUD_KINDS or "signal" in value) and not _signal_of_kind(value):
        return False
    summary = value.get("summary", "")
    outputs = value.get("outputs", [])
    return (
        isinstance(summary, str)
        and len(summary) <= SUMMARY_LIMIT
        and isinstance(outputs, list)
        and all(isinstance(o, str) for o in outputs)
    )


def _signal_of_kind(error: Mapping[str, object]) -> bool:
    signal = error.get("signal")
    return isinstance(signal, str) and SIGNALS.get(signal) == error["kind"]


def signal_of(error: object) -> str | None:
    """The recognised signal a result's error carries (checked as valid_error checks it);
    None for any other error."""
    if isinstance(error, Mapping) and "kind" in error and _signal_of_kind(error):
        return str(error["signal"])
    return None


def step_ok(step: Json) -> bool:
    """Whether a step's exit code is a success: 0, or 2 of a plan (changes present,
    under -detailed-exitcode; a plan that fails exits 1)."""
    code = step.get("exitCode")
    return code == 0 or (code == 2 and step.get("name") == "plan")
