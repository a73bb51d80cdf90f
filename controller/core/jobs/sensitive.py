"""Which values a Job must never let out: what the runner and the controller redact.

They are the values of the Job's credentials Secret, the variables that came from
`variablesFrom` Secrets (named on the Job in RunnerVar.SECRET_VARIABLES, values in its
durable inputs), and the variables the module itself declares `sensitive = true`.
Both sides compute the set from the same Job and Secrets, so the controller's second
pass removes exactly what the runner's first one should have."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping

import orjson

from controller.core.basics.redact import Redactor, redactor
from controller.core.contract.roles import CONTRACTS
from controller.core.jobs.job_env import JobEnv, job_env
from controller.core.spec import inputs_secret
from controller.core.spec.inputs_secret import (
    CONTRACT_KEY,
    VARIABLES_KEY,
    InputsData,
    InputsSecretError,
)
from controller.core.spec.refs import SECRET, variable_sources
from runtime.jsonobj import Json

# The contract inputs the generated root declares sensitive (the bootstrap payload).
SENSITIVE_INPUTS = frozenset(
    spec.name for contract in CONTRACTS.values() for spec in contract.inputs if spec.sensitive
)

# One scan over a module's text, linear in its length: every pattern is anchored on a
# literal or a line start, and no repetition can run over a line break unless the literal
# before it was consumed (a leading `\s*` would rescan every run of blank lines from each
# of its lines: quadratic, tens of seconds on a 1 MiB module).
# A block header (`variable "name" {`, or any `{`), a `}`, or `sensitive = true` at the
# start of a line.
_TOKENS = re.compile(
    r'(?P<variable>^[ \t]*variable[ \t]+"(?P<name>[^"\n]+)"[ \t]*\{)'
    r"|(?P<sensitive>^[ \t]*sensitive\s*=\s*true\b)"
    r"|(?P<open>\{)|(?P<close>\})",
    re.MULTILINE,
)
# `variable "name" { sensitive = true }` on one line: the attribute right after the brace.
_INLINE_SENSITIVE = re.compile(r"[ \t]*sensitive\s*=\s*true\b")
# Comments, an unterminated `/*` running to the end (each `/*` is then passed over once).
_COMMENT = re.compile(r"(?:#|//)[^\n]*|/\*.*?(?:\*/|\Z)", re.S)


def secret_data(secret: Json | None) -> dict[str, str]:
    """A Secret's values as text; undecodable values are skipped (no text leaks them)."""
    out: dict[str, str] = {}
    for key, raw in ((secret or {}).get("data") or {}).items():
        try:
            out[key] = base64.b64decode(raw, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, TypeError, ValueError):
            continue
    for key, text in ((secret or {}).get("stringData") or {}).items():
        out[key] = str(text)
    return out


def sensitive_variables(module: Mapping[str, str]) -> set[str]:
    """Names of the variables a module declares sensitive, in `.tf` and `.tf.json` files."""
    names: set[str] = set()
    for file, text in module.items():
        if file.endswith(".tf.json"):
            names |= _json_sensitive(text)
        elif file.endswith(".tf"):
            names |= _hcl_sensitive(text)
    return names


def _hcl_sensitive(text: str) -> set[str]:
    """Variables with `sensitive = true` among their own attributes (a nested block, such
    as a validation, says nothing of its variable). Braces are counted as they come, once:
    a stack of the open blocks, each the variable it opens or None."""
    names: set[str] = set()
    text = _COMMENT.sub("", text)
    blocks: list[str | None] = []
    for token in _TOKENS.finditer(text):
        if token["variable"]:
            blocks.append(token["name"])
            if _INLINE_SENSITIVE.match(text, token.end()):
                names.add(token["name"])
        elif token["sensitive"]:
            if blocks and blocks[-1] is not None:
                names.add(blocks[-1])
        elif token["open"]:
            blocks.append(None)
        elif blocks:
            blocks.pop()
    return names


def _json_sensitive(text: str) -> set[str]:
    try:
        variables = (orjson.loads(text) or {}).get("variable") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return set()
    if not isinstance(variables, dict):
        return set()
    return {name for name, decl in variables.items() if (decl or {}).get("sensitive") is True}


def leaves(value: object) -> Iterator[str]:
    """The text of every scalar in a variable's value (a map of tokens hides each token)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    elif isinstance(value, str):
        yield value
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def values(
    inputs: InputsData | None, secret_variables: Iterable[str], credentials: Json | None
) -> set[str]:
    """The secret values of one Job: its credentials Secret's values, and the values of
    the variables from Secrets or declared sensitive, and the sensitive contract inputs,
    of what its inputs Secret carries (None: no inputs Secret)."""
    found = set(secret_data(credentials).values())
    if inputs is None:
        return found
    for name in set(secret_variables) | sensitive_variables(inputs.module):
        found.update(leaves(inputs.variables.get(name)))
    contract = inputs.contract or {}
    for name in SENSITIVE_INPUTS:
        found.update(leaves(contract.get(name)))
    return found


def inputs_values(secret: Json | None, secret_variables: Iterable[str]) -> set[str]:
    """The secret values a Job's inputs Secret carries (none without the Secret). A
    malformed one (spec/inputs_secret.py), which every reader refuses and the runner
    runs nothing with, hides every value its JSON keys hold that can be read: which of
    them are secret cannot be told, and hiding too much leaks nothing."""
    if secret is None:
        return set()
    try:
        carried = inputs_secret.decode(secret.get("data"))
    except InputsSecretError:
        found: set[str] = set()
        for key, text in secret_data(secret).items():
            if key in (VARIABLES_KEY, CONTRACT_KEY):
                found.update(leaves(_json_object(text)))
        return found
    return values(carried, secret_variables, None)


def _json_object(text: str | None) -> Json:
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def secret_variable_names(spec: Json, secrets: Mapping[str, Json]) -> list[str]:
    """Names of the variables an object takes from `variablesFrom` Secrets, sorted: a key
    for a keyed entry, every key of the Secret otherwise (as inputs.render reads them)."""
    names: set[str] = set()
    for source in variable_sources(spec):
        if source.kind != SECRET:
            continue
        if source.key:
            names.add(source.key)
        else:
            names.update((secrets.get(source.name) or {}).get("data") or {})
    return sorted(names)


def job_redactor(job: Json, secrets: Mapping[str, Json]) -> Redactor:
    """The Redactor for the messages of a Job, from the Secrets it carried (those in
    `secrets` by name; one not there adds nothing)."""
    return env_redactor(job_env(job), secrets)


def redactor_key(env: JobEnv) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """What a Job's Redactor depends on besides the Secrets: Jobs with equal keys, read
    against the same Secrets, have the same Redactor."""
    return env.inputs_secret, env.from_secrets, tuple(env.secret_variables)


def env_redactor(env: JobEnv, secrets: Mapping[str, Json]) -> Redactor:
    """job_redactor, from the Job's environment as job_env reads it."""
    found = inputs_values(secrets.get(env.inputs_secret), env.secret_variables)
    for name in env.from_secrets:
        found |= values(None, [], secrets.get(name))
    return redactor(found)
