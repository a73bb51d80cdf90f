"""The pure decision core: functions of a snapshot and the time, nothing else.

Its face (`face`, whose names this package gives): what io (the reconciler, the
caches, the janitor) needs, and nothing more. The rooms behind it, bottom to top, each
importing only the ones below (an import-linter contract holds them to it):

- basics: CAPTF's API names, Kubernetes time formats, serials, redaction, the
  runner contract's variables (io imports these directly: they are vocabulary);
- conversion: the API versions, and an object of one converted to the other;
- spec: an object's spec as read (policy, windows, inputs, references, Ready);
- jobs: one Job, the history of an object's Jobs, backoff, retention, naming, the
  result read from a termination message;
- leases: Lease writes as data, the family exclusion, run slots, stale holds;
- admission: the checks the admission webhook makes (decide makes them again);
- decide: the snapshot, Settings and Facts, the context, DecideOp's steps;
- plan: the plan of one pass (accounting, the launch, pruning, the status).
"""

# The face is imported on the first name asked of this package, not with it: importing
# any room (controller.core.basics.names, say) runs this file first, and the runner,
# which needs basics and jobs, would otherwise load every room, the planner included
# (about 0.15 s of a runner pod's start; docs/performance.md).
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controller.core.face import *  # noqa: F403
    from controller.core.face import __all__ as __all__


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    # importlib, not `from controller.core import face`: that asks this hook for `face`.
    face = importlib.import_module("controller.core.face")
    try:
        value = getattr(face, name)
    except AttributeError:
        raise AttributeError(f"module 'controller.core' has no attribute {name!r}") from None
    globals()[name] = value
    return value
