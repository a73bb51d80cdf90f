"""Checks of an object's spec that make its Jobs impossible to build (JobPolicyInvalid).

The CRD schema rejects most of these at admission; DecideOp checks again
because objects can predate a schema change and snapshots come from files."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Final

from controller.core.basics.names import MIN_INTERVAL
from controller.core.basics.timefmt import TimeFormatError, parse_duration
from controller.core.spec.jobpod import PodPolicy, PodPolicyError, resolve
from controller.core.spec.skew import skew_refusal
from controller.core.spec.windows import Window, WindowError, parse_windows
from runtime.jsonobj import Json

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


# The operator's defaults: the runner image the controller's Deployment ships, and the
# runner account manifests/runner-rbac.yaml creates in each team namespace.
DEFAULT_IMAGES: tuple[str, ...] = ("captf:dev",)
DEFAULT_SERVICE_ACCOUNTS: tuple[str, ...] = ("captf-runner",)
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class RunnerPolicy:
    """What the operator lets an object's Jobs run (`captf run --allowed-images` and
    `--allowed-service-accounts`): shell-style globs. The object chooses among them; the
    first account that is a plain name is what a Job runs as when the object names none."""

    images: tuple[str, ...] = DEFAULT_IMAGES
    service_accounts: tuple[str, ...] = DEFAULT_SERVICE_ACCOUNTS
    # `--job-defaults`: the pod policy fields of spec.jobs an object and its cluster leave
    # unset (controller/core/spec/jobpod.py), checked when the process starts.
    pod_defaults: Json = field(default_factory=dict)

    def default_account(self) -> str | None:
        return next((a for a in self.service_accounts if not _GLOB.search(a)), None)


def globs(text: str) -> tuple[str, ...]:
    """A comma-separated flag value as a tuple of globs, blanks dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def runner_policy(args: object) -> RunnerPolicy:
    """The policy from the `--allowed-images`/`--allowed-service-accounts` flags, which
    `captf run` and `captf decide` share (argparse attributes allowed_images and
    allowed_service_accounts, comma-separated), and `--job-defaults` (job_defaults, read
    and checked by controller/core/decide/settings.py's `job_defaults`)."""
    defaults = getattr(args, "job_defaults", None)
    return RunnerPolicy(
        images=globs(str(getattr(args, "allowed_images", ",".join(DEFAULT_IMAGES)))),
        service_accounts=globs(
            str(getattr(args, "allowed_service_accounts", ",".join(DEFAULT_SERVICE_ACCOUNTS)))
        ),
        pod_defaults=defaults if isinstance(defaults, dict) else {},
    )


# No restriction, and the namespace's default account: for snapshots read without an
# operator's policy (tests, files that predate it).
OPEN = RunnerPolicy(images=("*",), service_accounts=("*",))


@dataclass(frozen=True)
class Policy:
    """The spec fields DecideOp reads, validated and with their defaults applied."""

    failed_limit: int
    successful_limit: int
    active_deadline: int
    drift_interval: float | None
    drift_remediate: bool
    refresh_interval: float | None
    manual: bool
    allow_destructive: bool
    windows: list[Window]
    service_account: str | None = None  # what the Jobs run as; None: the namespace's default
    suspend: bool = False  # no new Job starts
    # spec.deletionPolicy as written: Delete, Retain, or None (a member takes its
    # cluster's, controller/core/spec/deletion.py; a cluster's None is Delete).
    deletion: str | None = None
    # spec.health.interval: a Ready machine's health re-read (None: off).
    health_interval: float | None = None
    # spec.membership.interval: a pool's members re-read (None: off).
    membership_interval: float | None = None
    # spec.health.unhealthyThreshold as written; None: the cluster's, else the default
    # (controller/core/decide/remediation.py, `threshold`).
    unhealthy_threshold: int | None = None
    adopt_retained_state: bool = False  # spec.adoptRetainedState
    # How the runner pod is shaped (resources, scheduling, security contexts, extra env):
    # never an input, so changing it re-applies nothing.
    pod: PodPolicy = field(default_factory=PodPolicy)


class PolicyError(ValueError):
    """The object's Job policy is invalid; the message names the field."""


def _int(jobs: Json, key: str, default: int, minimum: int) -> int:
    value = jobs.get(key)
    if value is None:  # absent or null: the CRD default
        value = default
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"spec.jobs.{key} must be an integer, got {value!r}")
    if value < minimum:
        raise PolicyError(f"spec.jobs.{key} must be at least {minimum}, got {value}")
    return value


def _section(spec: Json, key: str) -> Json:
    """A mapping section of the spec; absent or null is empty."""
    value = spec.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PolicyError(f"spec.{key} must be an object, got {value!r}")
    return value


def _bool(spec: Json, section: str, key: str) -> bool:
    """A boolean field; absent or null is false (the CRD default). A string such as
    "false" is refused, not read as true."""
    value = _section(spec, section).get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise PolicyError(f"spec.{section}.{key} must be true or false, got {value!r}")
    return value


# The schedules on by default (docs/decisions.md, issue 30): absent, the interval is
# this; `0` (or `0s`, or empty) turns the schedule off. The refresh has none.
DEFAULT_INTERVALS: Final = {"drift": 1800.0, "health": 300.0, "membership": 60.0}


def _interval(spec: Json, section: str) -> float | None:
    fields = _section(spec, section)
    if "interval" not in fields:
        return DEFAULT_INTERVALS.get(section)
    raw = fields["interval"]
    if raw in (None, "", "0", 0):
        return None
    try:
        seconds = parse_duration(str(raw))
    except TimeFormatError as err:
        raise PolicyError(f"spec.{section}.interval: {err}") from None
    if seconds < 0:
        raise PolicyError(f"spec.{section}.interval must not be negative, got {raw!r}")
    return max(seconds, MIN_INTERVAL) if seconds else None


def _allowed(value: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatchcase(value, glob) for glob in globs)


def _runner(jobs: Json, runner: RunnerPolicy) -> str | None:
    """Checks the image and account against the operator's policy; returns the account."""
    image = jobs["image"]
    if not _allowed(image, runner.images):
        allowed = ",".join(runner.images)
        raise PolicyError(
            f"spec.jobs.image {image!r} is not allowed by the controller's "
            f"--allowed-images={allowed}"
        )
    too_far = skew_refusal(image)
    if too_far is not None:
        raise PolicyError(too_far)
    account = jobs.get("serviceAccountName")
    if account is None:
        return runner.default_account()
    if not (isinstance(account, str) and _DNS_SUBDOMAIN.match(account)):
        raise PolicyError(f"spec.jobs.serviceAccountName is not a valid name: {account!r}")
    if not _allowed(account, runner.service_accounts):
        allowed = ",".join(runner.service_accounts)
        raise PolicyError(
            f"spec.jobs.serviceAccountName {account!r} is not allowed by the controller's "
            f"--allowed-service-accounts={allowed}"
        )
    return account


def read_policy(
    spec: Json, runner: RunnerPolicy = OPEN, *, inherited: Json | None = None
) -> Policy:
    """The validated policy of a spec under the operator's runner policy, or PolicyError
    naming the first bad field (and, for a refused image or account, the flag).
    `inherited`: the TerraformCluster's spec.jobs, whose pod policy fields a pool or
    machine takes where its own are unset."""
    jobs = _section(spec, "jobs")
    if not isinstance(jobs.get("image"), str) or not jobs["image"].strip():
        raise PolicyError("spec.jobs.image is required")
    account = _runner(jobs, runner)
    mode = _section(spec, "approval").get("mode") or "Auto"
    if mode not in ("Auto", "Manual"):
        raise PolicyError(f"spec.approval.mode must be Auto or Manual, got {mode!r}")
    deletion = read_deletion_policy(spec)
    adopt = spec.get("adoptRetainedState")
    if adopt is not None and not isinstance(adopt, bool):
        raise PolicyError(f"spec.adoptRetainedState must be true or false, got {adopt!r}")
    suspend = spec.get("suspend")
    if suspend is not None and not isinstance(suspend, bool):
        raise PolicyError(f"spec.suspend must be true or false, got {suspend!r}")
    try:
        windows = parse_windows(spec.get("changeWindows"))
    except WindowError as err:
        raise PolicyError(f"spec.{err}") from None
    try:
        pod = resolve(jobs, inherited=inherited, defaults=runner.pod_defaults)
    except PodPolicyError as err:
        raise PolicyError(str(err)) from None
    return Policy(
        failed_limit=_int(jobs, "failedJobsHistoryLimit", 3, 0),
        successful_limit=_int(jobs, "successfulJobsHistoryLimit", 1, 0),
        active_deadline=_int(jobs, "activeDeadlineSeconds", 3600, 1),
        drift_interval=_interval(spec, "drift"),
        drift_remediate=_bool(spec, "drift", "remediate"),
        refresh_interval=_interval(spec, "refresh"),
        health_interval=_interval(spec, "health"),
        membership_interval=_interval(spec, "membership"),
        unhealthy_threshold=read_unhealthy_threshold(spec),
        manual=mode == "Manual",
        allow_destructive=_bool(spec, "guard", "allowDestructive"),
        windows=windows,
        service_account=account,
        suspend=bool(suspend),
        deletion=deletion,
        adopt_retained_state=bool(adopt),
        pod=pod,
    )


# spec.health.unhealthyThreshold: how many unhealthy readings in a row ask for remediation.
THRESHOLD_RANGE: Final = (1, 100)


def read_unhealthy_threshold(spec: Json) -> int | None:
    """spec.health.unhealthyThreshold, an integer from 1 to 100; None when unset."""
    value = _section(spec, "health").get("unhealthyThreshold")
    if value is None:
        return None
    low, high = THRESHOLD_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PolicyError(
            f"spec.health.unhealthyThreshold must be an integer from {low} to {high}, got {value!r}"
        )
    return value


DELETION_POLICIES = ("Delete", "Retain")


def read_deletion_policy(spec: Json) -> str | None:
    """spec.deletionPolicy: Delete, Retain, or None when unset. `Orphan`, the old name of
    Retain, is refused rather than read as Retain: an object stored with it releases
    nothing until its owner says Retain (or Delete) again."""
    value = spec.get("deletionPolicy")
    if value is None:
        return None
    if value == "Orphan":
        raise PolicyError(
            "spec.deletionPolicy Orphan is no longer accepted: write Retain (keeps the state, "
            "its backups and the inputs for a later object) or Delete"
        )
    if value not in DELETION_POLICIES:
        raise PolicyError(f"spec.deletionPolicy must be Delete or Retain, got {value!r}")
    return str(value)
