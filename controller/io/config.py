"""`captf run`'s settings, typed, with their defaults in one place.

The command line (controller/cli/main.py) takes its defaults from here, and so do the
tests and the demo that start a controller without a command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields, replace
from typing import Any

from controller.core import (
    DEFAULT_IMAGES,
    DEFAULT_SERVICE_ACCOUNTS,
    DEFAULT_SIZE_LIMIT,
    Settings,
    settings_of,
)


@dataclass(frozen=True)
class ControllerConfig:
    kubeconfig: str | None = None  # default: $KUBECONFIG, ~/.kube/config, in-cluster
    namespace: str | None = None  # watch only this namespace; None: all
    # --namespaces a,b: watch only these (an informer per namespace each; Roles suffice).
    namespaces: str | None = None
    controller_namespace: str | None = None  # run slots and the leader Lease; None: the pod's
    max_concurrent_runs: int = 10
    # Slots one Cluster API cluster's Jobs may hold (docs/controller.md#run-slots); 0: no cap.
    max_concurrent_runs_per_cluster: int = 0
    # Of the run slots, the share background Jobs may hold; the background Jobs a set of
    # credentials without a budget of its own may start a minute (docs/controller.md).
    background_run_share: float = 0.5
    background_jobs_per_minute: int = 60
    # A reconcile spends most of its time waiting on the API server (a status write, a
    # patch: 70-260 ms under load), not on CPU (about 1 ms of decision): 16 keeps the queue
    # short at 100 changes/s while leaving the API server's in-flight limits far away.
    workers: int = 16
    watch_label_selector: str | None = None  # shard by label
    leader_elect: bool = True
    leader_election_id: str = "captf-controller"
    metrics_addr: str = "127.0.0.1:8080"
    # HTTPS /metrics for tokens the API server allows; the probes then on their own port.
    metrics_secure: bool = False
    metrics_cert_dir: str | None = None  # tls.crt, tls.key; None: self-signed at start
    # The per-object gauges' name label; off, they are aggregated per namespace and kind
    # (controller/io/object_metrics.py), for fleets too large for a series per object.
    metrics_object_names: bool = True
    health_probe_addr: str = "127.0.0.1:8081"
    # The admission webhooks (HTTPS, every replica); None: not served.
    webhook_addr: str | None = None
    webhook_cert_dir: str | None = None  # tls.crt, tls.key; None: self-signed at start
    allowed_images: str = ",".join(DEFAULT_IMAGES)
    allowed_service_accounts: str = ",".join(DEFAULT_SERVICE_ACCOUNTS)
    cannot_start_grace: float = 60.0  # seconds a Job that cannot start is reported, then ended
    max_module_image_size: int = DEFAULT_SIZE_LIMIT  # bytes of a module image's layers
    # --job-defaults, read and checked: the pod policy fields objects leave unset.
    job_defaults: dict[str, Any] = field(default_factory=dict)
    # volume, copy, or auto: from a dry-run Job the API server answers, else its version.
    module_image_mount: str = "auto"
    time_scale: float = 1.0
    # Finished TerraformPlans (Applied, Superseded, Changed) kept per object.
    kept_plans: int = 3
    log_format: str | None = None  # "json" or "text"; None: text on a terminal

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ControllerConfig:
        given = vars(args)
        return cls(**{f.name: given[f.name] for f in fields(cls) if f.name in given})

    def watched(self) -> tuple[str, ...] | None:
        """The namespaces watched, None for all: --namespaces, else --namespace."""
        if self.namespaces:
            names = [n.strip() for n in self.namespaces.split(",") if n.strip()]
            return tuple(dict.fromkeys(names))
        return (self.namespace,) if self.namespace else None

    def watched_filter(self) -> str | frozenset[str] | None:
        """What the janitor judges: the watched namespaces (None: all)."""
        found = self.watched()
        return None if found is None else frozenset(found)

    def problem(self) -> str | None:
        """What makes the settings unusable, or None."""
        if self.namespace and self.namespaces:
            return "--namespace and --namespaces exclude each other"
        if self.namespaces is not None and not self.watched():
            return "--namespaces needs at least one namespace"
        if self.max_concurrent_runs < 1 or self.workers < 1 or self.time_scale <= 0:
            return "--max-concurrent-runs, --workers and --time-scale must be positive"
        if self.kept_plans < 0:
            return "--kept-plans must not be negative"
        if self.max_concurrent_runs_per_cluster < 0:
            return "--max-concurrent-runs-per-cluster must not be negative (0: no cap)"
        if not 0 < self.background_run_share <= 1:
            return "--background-run-share must be more than 0 and at most 1"
        if not 1 <= self.background_jobs_per_minute <= 1000:
            return "--background-jobs-per-minute must be from 1 to 1000"
        return None

    def settings(
        self,
        slot_namespace: str,
        server_version: tuple[int, int] | None = None,
        image_volumes: bool | None = None,
    ) -> Settings:
        """What the plan reads of these flags (as `captf decide` builds it from its own);
        `slot_namespace`: the controller's namespace, once resolved; `server_version` and
        `image_volumes`: the API server's answers, for --module-image-mount=auto."""
        shared = settings_of(
            self,
            slot_namespace=slot_namespace,
            watch_label_selector=self.watch_label_selector,
            server_version=server_version,
            image_volumes=image_volumes,
        )
        return replace(shared, kept_plans=self.kept_plans)


DEFAULTS = ControllerConfig()
