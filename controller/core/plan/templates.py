"""One pass over one TerraformMachineTemplate or TerraformMachinePoolTemplate, as data:
its scale-from-zero status (controller/core/contract/capacity.py) and the lookup of its
module image that the status needs.

A template runs nothing: its pass only reads the image's labels, once per image
reference and generation. `status.capacity` is `spec.capacity` when set (a module that
takes its size as a variable), else the image's `io.captf.capacity`; `status.nodeInfo`
likewise from `spec.nodeInfo` or `io.captf.node-info`. `CapacityResolved` says where
they came from, or why not. A failed lookup keeps the values shown and is retried after
as long as it has been failing (at least 30 s, at most 10 min): the delay doubles with
no counter kept, from the condition's own lastTransitionTime.

The rule itself (`capacity_status`) is shared: a TerraformMachinePool shows the same
fields, by the same rule, from the answer its own pass has (plan/pool_capacity.py).

Pure, and one pass a reconcile: `template_lookup` says, from the template alone, which
lookup the pass needs (as `reads.py` says what an object's pass reads); io gathers its
answer as a fact first, then enters `template_pass` once with it and carries the status
and Events out."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from controller.core.basics.names import RUNNER_ACCOUNT
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.core.contract.capacity import (
    LABEL_CAPACITY,
    LABEL_NODE_INFO,
    ShapeError,
    check_capacity,
    check_node_info,
    parse_capacity,
    parse_node_info,
)
from controller.core.plan.accounting import Event
from controller.core.plan.status import merge_conditions
from controller.core.spec.image import ImageFact, ImageLookup, Resolved, Unresolved
from runtime.jsonobj import Json

CONDITION: Final = "CapacityResolved"
RESOLVED: Final = "CapacityResolved"
NOT_DECLARED: Final = "CapacityNotDeclared"
INSPECT_FAILED: Final = "ImageInspectFailed"
LABEL_INVALID: Final = "CapacityLabelInvalid"
SPEC_INVALID: Final = "CapacitySpecInvalid"
NOT_INSPECTED: Final = "ImageNotInspected"
RETRY_FIRST: Final = 30.0
RETRY_CAP: Final = 600.0


@dataclass(frozen=True)
class TemplatePass:
    status: Json | None = None  # a merge patch of status; None: unchanged
    events: tuple[Event, ...] = ()
    requeue: float | None = None


def image_of(template: Json) -> str | None:
    source = (((template.get("spec") or {}).get("template") or {}).get("spec") or {}).get("source")
    image = (source or {}).get("image")
    return str(image) if image else None


def needs_lookup(template: Json) -> bool:
    """Whether the status does not yet say what this generation's image carries: a new
    template, a new generation, or a lookup that failed (retried on its schedule)."""
    image = image_of(template)
    if image is None:
        return False
    status = template.get("status") or {}
    source = status.get("capacitySource") or {}
    generation = (template.get("metadata") or {}).get("generation", 0)
    failed = _condition(status).get("reason") == INSPECT_FAILED
    return failed or source.get("image") != image or status.get("observedGeneration") != generation


def template_lookup(template: Json) -> ImageLookup | None:
    """The registry lookup the template's pass needs before it is planned, or None: when
    the status already says what this generation's image carries, or there is no image.
    The pull credentials are those a Job made from the template would have (the default
    account is the runner's, as the controller's --allowed-service-accounts default)."""
    image = image_of(template)
    if image is None or not needs_lookup(template):
        return None
    account = _jobs(template).get("serviceAccountName") or RUNNER_ACCOUNT
    return ImageLookup(image, template["metadata"]["namespace"], str(account))


def template_pass(template: Json, fact: ImageFact | None, now: datetime) -> TemplatePass:
    """The template's pass, given the answer to `template_lookup`'s lookup (None: it
    asked none, and what the image carries is shown already)."""
    image = image_of(template)
    if image is not None and fact is None:
        return TemplatePass()
    status, retry = _desired(template, image, fact, now)
    old = template.get("status") or {}
    patch = {k: _replacing(old.get(k), v) for k, v in status.items() if old.get(k) != v}
    for gone in ("capacity", "nodeInfo"):
        if gone in old and gone not in status:
            patch[gone] = None
    events = _events(template, old, status, now)
    return TemplatePass(status=patch or None, events=events, requeue=retry)


def _replacing(old: Any, new: Any) -> Any:
    """A merge patch replaces a map only key by key: the keys it no longer has are nulled
    (a capacity without the GPU the label named loses the GPU)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: None for k in old if k not in new} | new
    return new


def _jobs(template: Json) -> Json:
    spec = ((template.get("spec") or {}).get("template") or {}).get("spec") or {}
    jobs = spec.get("jobs")
    return jobs if isinstance(jobs, dict) else {}


def _desired(
    template: Json, image: str | None, fact: ImageFact | None, now: datetime
) -> tuple[Json, float | None]:
    old = template.get("status") or {}
    fields, cond = capacity_status(template.get("spec") or {}, image, fact, old)
    out: Json = {"observedGeneration": (template.get("metadata") or {}).get("generation", 0)}
    out |= {k: v for k, v in fields.items() if v}
    out["conditions"] = merge_conditions(old.get("conditions") or [], [cond], now)
    return out, (_retry_after(old, now) if isinstance(fact, Unresolved) else None)


def capacity_status(
    spec: Json, image: str | None, fact: ImageFact | None, old: Json
) -> tuple[Json, Json]:
    """The rule, in one place for the templates and a TerraformMachinePool: `capacity`,
    `nodeInfo` (None: not shown) and `capacitySource` from `spec` (its `capacity` and
    `nodeInfo`) and the answer `fact` for the module `image`, over the status `old`; and
    the CapacityResolved condition, without its transition time. Each of the two values
    is the spec's, whole, else the image label's. An image not looked up (`fact` None, an
    image named) or whose lookup failed keeps the image's values shown; the spec's stand
    without the registry."""
    labels = _labels(fact)
    capacity, cap_problem = _value(spec.get("capacity"), labels.get(LABEL_CAPACITY), "capacity")
    node_info, info_problem = _value(spec.get("nodeInfo"), labels.get(LABEL_NODE_INFO), "nodeInfo")
    unread = image is not None and not isinstance(fact, Resolved)
    if unread:
        capacity = capacity if spec.get("capacity") else old.get("capacity")
        node_info = node_info if spec.get("nodeInfo") else old.get("nodeInfo")
    problem = cap_problem or info_problem
    if image is not None and fact is None and not problem:
        # Between lookups (a pool's: made before its apply, plan and drift checks).
        source = _source_between(spec, image, old)
        cond = _kept(spec, old)
    else:
        source = _source(spec, image, fact)
        cond = _condition_of(spec, fact, problem, capacity, node_info)
    fields = {"capacity": capacity, "nodeInfo": node_info, "capacitySource": source}
    return fields, cond


def _source_between(spec: Json, image: str, old: Json) -> Json:
    """capacitySource between lookups: the spec's, else as shown; the image read kept
    while it is still the one named."""
    shown = old.get("capacitySource") or {}
    source = "Spec" if spec.get("capacity") else shown.get("source", "Image")
    out: Json = {"source": source}
    if shown.get("image") == image:
        out["image"] = image
    return out


def _kept(spec: Json, old: Json) -> Json:
    """CapacityResolved between lookups: the spec's capacity resolves it; else as shown,
    or Unknown until the image is read."""
    if spec.get("capacity"):
        return _cond("True", RESOLVED, "capacity from spec.capacity")
    shown = _condition(old)
    if shown:
        return {k: shown[k] for k in ("type", "status", "reason", "message") if k in shown}
    return _cond("Unknown", NOT_INSPECTED, "the module image's labels are read at its next lookup")


def _labels(fact: ImageFact | None) -> dict[str, str]:
    if not isinstance(fact, Resolved):
        return {}
    return {
        k: v for k, v in ((LABEL_CAPACITY, fact.capacity), (LABEL_NODE_INFO, fact.node_info)) if v
    }


def _value(spec_value: Any, label: str | None, field: str) -> tuple[dict[str, str] | None, str]:
    """The field's value (the spec's, whole, else the label's) and what was wrong."""
    check, parse = (
        (check_capacity, parse_capacity)
        if field == "capacity"
        else (check_node_info, parse_node_info)
    )
    try:
        if spec_value:
            return check(spec_value), ""
        return (parse(label) if label is not None else None), ""
    except ShapeError as err:
        where = (
            f"spec.{field}"
            if spec_value
            else (LABEL_CAPACITY if field == "capacity" else LABEL_NODE_INFO)
        )
        return None, f"{where}: {err}"


def _source(spec: Json, image: str | None, fact: ImageFact | None) -> Json:
    out: Json = {"source": "Spec" if spec.get("capacity") else "Image"}
    if image is not None and isinstance(fact, Resolved):
        out["image"] = image
    return out


def _condition_of(
    spec: Json, fact: ImageFact | None, problem: str, capacity: Any, node_info: Any
) -> Json:
    if problem:
        reason = SPEC_INVALID if problem.startswith("spec.") else LABEL_INVALID
        return _cond("False", reason, problem)
    if isinstance(fact, Unresolved):
        if spec.get("capacity"):
            return _cond(
                "True", RESOLVED, f"image not inspected ({fact.kind}); capacity from spec.capacity"
            )
        return _cond("False", INSPECT_FAILED, f"the module image could not be read: {fact.kind}")
    if capacity is None and node_info is None:
        message = (
            "neither spec.capacity nor the image's io.captf.capacity label says the node's size"
        )
        return _cond("True", NOT_DECLARED, message)
    where = "spec" if spec.get("capacity") else "the module image's labels"
    return _cond("True", RESOLVED, f"capacity and nodeInfo from {where}")


def _cond(status: str, reason: str, message: str) -> Json:
    return {"type": CONDITION, "status": status, "reason": reason, "message": message}


def _condition(status: Json) -> Json:
    for cond in status.get("conditions") or []:
        if cond.get("type") == CONDITION:
            return dict(cond)
    return {}


def _retry_after(old: Json, now: datetime) -> float:
    """As long as the lookups have been failing, within [30 s, 10 min]: doubling."""
    cond = _condition(old)
    if cond.get("reason") != INSPECT_FAILED:
        return RETRY_FIRST
    try:
        since = parse_time(str(cond.get("lastTransitionTime") or ""))
    except TimeFormatError:
        return RETRY_FIRST
    return min(max((now - since).total_seconds(), RETRY_FIRST), RETRY_CAP)


def _set(out: Json, key: str, value: Any) -> None:
    if value:
        out[key] = value


def _events(template: Json, old: Json, new: Json, now: datetime) -> tuple[Event, ...]:
    """CapacityResolved (Normal) when the values change; ImageInspectFailed (Warning) when
    the lookups start failing. Named for what they announce: a replay is refused."""
    name = template["metadata"]["name"]
    cond = _condition(new)
    if cond.get("reason") == INSPECT_FAILED and _condition(old).get("reason") != INSPECT_FAILED:
        tag = _digest([name, cond.get("lastTransitionTime")])
        return (Event(f"{name}.inspect-failed.{tag}", "Warning", INSPECT_FAILED, cond["message"]),)
    return capacity_event(template, old, new)


def capacity_event(obj: Json, old: Json, new: Json) -> tuple[Event, ...]:
    """CapacityResolved (Normal) when the status `new` shows other values than `old`,
    named for them (and the object's uid): a replay is refused."""
    values = {k: new.get(k) for k in ("capacity", "nodeInfo")}
    if values == {k: old.get(k) for k in values} or not any(values.values()):
        return ()
    name = obj["metadata"]["name"]
    tag = _digest([obj["metadata"].get("uid"), values])
    message = f"capacity {_show(values['capacity'])}, nodeInfo {_show(values['nodeInfo'])}"
    return (Event(f"{name}.capacity.{tag}", "Normal", RESOLVED, message),)


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":")) if value else "unset"


def _digest(parts: list[Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]
