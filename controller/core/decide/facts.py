"""What a pass knows beyond the Snapshot: this process's memory and the live reads.

One of the three inputs of a pass, beside the Snapshot (what the cluster shows) and
the Settings (the operator's flags). io fills it (controller/io/memory.py holds the
memory); `captf decide` has none of it, so every field's default is "nothing
remembered, nothing read live"."""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from controller.core.decide.runner_rbac import RunnerFacts
from controller.core.spec.image import ImageFact


@dataclass(frozen=True)
class Refusal:
    """The API server refused the object's Job `job` `count` times in a row, the last at
    `at`, saying `why`. The streak is the Job's name: it stays the same until a Job of
    the object is created. `announced`: its Warning was recorded; one per streak."""

    job: str
    count: int
    at: datetime
    why: str
    announced: bool = False

    @property
    def message(self) -> str:
        return f"the API server refused Job {self.job}: {self.why}"


@dataclass(frozen=True)
class Facts:
    # Jobs this process created for the object that its cache does not show yet.
    pending_jobs: frozenset[str] = frozenset()
    # status.activeJob's Job is NotFound, and the live object still names it (live reads).
    active_gone: bool = False
    # Jobs this process deleted itself (pruned): their disappearance is no interruption.
    # A membership view of the memory, not a copy: a pass asks about one name at most.
    deleted_by_us: Container[str] = frozenset()
    # The object's current streak of Jobs the API server refused.
    refusal: Refusal | None = None
    # Results read live from the termination messages of finished Jobs' pods (Job name ->
    # the `captf.io/result` value, checked by controller/core/jobs/termination.py), not yet
    # recorded on their Jobs. The Snapshot's Jobs show them already; the plan records them.
    results: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # The namespace's runner RBAC as the caches show it (controller/core/decide/
    # runner_rbac.py); None: not read (`captf decide`), so nothing is created or held.
    runner: RunnerFacts | None = None
    # The registry's answer for the object's module image (controller/io/registry.py):
    # looked up because the plan asked (`asked`), or found in io's short cache.
    image: ImageFact | None = None


NO_FACTS = Facts()
