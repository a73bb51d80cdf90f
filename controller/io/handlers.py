"""Who wakes whom: each watched change mapped to the keys of the objects to reconcile
(controller-runtime's event handlers; which events count is predicates.py's).

  a CAPTF object       itself, unless only the controller's own writes changed; and when
                       what others wait on changed, its dependants and its members (a
                       cluster) or its cluster (a pool or machine)
  a Cluster            its TerraformCluster and its members (by the cluster-name label)
  a Machine, Pool      the CAPTF objects it owns (a Cluster, Machine or Pool: unless
                       only what a pass does not read changed, the core's capi_read)
  a Job                its object, unless only the accounting mark changed
  a Secret, ConfigMap  the objects that read it, the object CAPTF wrote it for, and the
                       machines and pools whose owner takes its bootstrap data from it
  a Lease              once freed: a run slot, the longest waiting for one; either, the
                       objects waiting for an operation (of its namespace)
  an identity          itself and the objects that run with it
  a Namespace          once its labels change, every identity, and the objects there
                       that run with one
  an identity's Secret the identity and the objects that run with it; a mirror, the
                       objects of its namespace that run with its identity
  a CAPTF object       also the identity it names, when that reference comes or goes
  a TerraformPlan      its object (by its labels), unless only its status changed
  a TerraformPolicy    when its spec changed (or it came or went), the objects that
                       wait PolicyDenied: the policy version their wait is for may have
                       moved; a Namespace's label change, those of its namespace
  a runner account     the objects that name it (an opt-in label set or taken away)
  a Pending pod        its object (a container waiting on an image pull failure)
  a FailedCreate Event the object of the Job it is about

A handler runs in the watch loop, so it only enqueues keys. Every fan-out goes through
an index (indexes.py): a change wakes the objects it concerns, never its namespace."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from controller.core import (
    CONFIGMAP,
    SECRET,
    cluster_name_of,
    is_finished,
    is_run_slot,
    pull_failure,
)
from controller.core.basics.names import (
    CAPI_CLUSTER,
    CLUSTER,
    KINDS,
    LABEL_IDENTITY_MIRROR,
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_PLAN_OF,
    MANAGER,
    Reason,
)
from controller.io.caches import Caches
from controller.io.identity_wakes import (
    identity_key,
    identity_users,
    identity_wakes,
    named_identities,
    secret_identities,
)
from controller.io.indexes import (
    BY_ACCOUNT,
    BY_CLUSTER,
    BY_DEPENDENCY,
    BY_OWNER,
    BY_REF,
    BY_WAITING,
    WAITING_FOR_LEASE,
    WAITING_FOR_POLICY,
)
from controller.io.keys import key_for, key_of
from controller.io.predicates import (
    cluster_news,
    job_news,
    lease_freed,
    next_reason,
    only_capi_version,
    only_own_object_writes,
    only_plan_status,
    seen_by_others,
)
from controller.io.triggers import SELF, Triggers
from runtime.cache import Informer
from runtime.cache.resource import Obj
from runtime.jsonobj import Json

# An informer's event, (old, new), mapped to the keys it wakes.
Wakes = Callable[[Obj | None, Obj | None], Iterable[str]]


def wire_handlers(
    caches: Caches, enqueue: Callable[[str], None], triggers: Triggers | None = None
) -> None:
    """Registers every handler; before the informers run, or the first adds are missed.
    `triggers` is told which watch woke each key (the reconciles' trigger label)."""
    add = partial(_add, enqueue=enqueue, triggers=triggers)
    for kind, informer in caches.objects.items():
        add(informer, partial(object_wakes, caches, kind), own=key_for)
    for kind, informer in caches.capi.items():
        add(informer, partial(capi_event_wakes, caches, kind))
    for kind, informer in caches.templates.items():
        add(informer, partial(template_wakes, kind), own=partial(_template_key, kind))
    add(caches.jobs, job_wakes)
    add(caches.plans, plan_wakes)
    for informer, source in ((caches.secrets, None), (caches.own_secrets, OWN_SECRETS)):
        informer.add_handler(caches.secret_data.forget_deleted)
        add(informer, partial(data_wakes, caches, SECRET), source=source)
    caches.configmaps.add_handler(caches.configmap_data.forget_deleted)
    add(caches.configmaps, partial(data_wakes, caches, CONFIGMAP))
    for leases in caches.lease_caches():
        add(leases, partial(lease_wakes, caches))
    add(caches.identities, partial(identity_wakes, caches), own=_identity_key_of)
    add(caches.namespaces, partial(namespace_wakes, caches))
    add(caches.policies, partial(policy_wakes, caches))
    add(caches.runner_accounts, partial(account_wakes, caches))
    add(caches.pending_pods, pod_wakes)
    add(caches.failed_creates, partial(event_wakes, caches))


def _add(
    informer: Informer,
    wakes: Wakes,
    *,
    enqueue: Callable[[str], None],
    triggers: Triggers | None,
    own: Callable[[Obj], str] | None = None,
    source: str | None = None,
) -> None:
    source = source or informer.resource.plural

    def handler(old: Obj | None, new: Obj | None) -> None:
        keys = list(wakes(old, new))
        if triggers is not None and keys:
            mine = own(new or old or {}) if own is not None else None
            for key in keys:
                triggers.woke(key, SELF if key == mine else source)
        for key in keys:
            enqueue(key)

    informer.add_handler(handler)


# The trigger of a wake by a Secret CAPTF wrote (inputs, state, plans, outputs: the
# labelled cache), told from the user's.
OWN_SECRETS = "captf-secrets"


def _template_key(kind: str, obj: Obj) -> str:
    meta = obj["metadata"]
    return key_of(kind, meta["namespace"], meta["name"])


def _identity_key_of(obj: Obj) -> str:
    return identity_key(obj["metadata"]["name"])


def object_wakes(caches: Caches, kind: str, old: Obj | None, new: Obj | None) -> list[str]:
    obj = new or old
    assert obj is not None
    meta = obj["metadata"]
    ns, name = meta["namespace"], meta["name"]
    keys = [] if only_own_object_writes(old, new) else [key_of(kind, ns, name)]
    keys += named_identities(old, new)
    if seen_by_others(old, new):
        keys += _keys(caches.objects_by(BY_DEPENDENCY, f"{ns}/{kind}/{name}"))
        if kind == CLUSTER:
            # Indexed only under a name: a TerraformCluster of no Cluster finds no members.
            members = caches.objects_by(BY_CLUSTER, f"{ns}/{cluster_name_of(obj)}")
            keys += _keys(m for m in members if m["kind"] != CLUSTER)
    if kind != CLUSTER:
        cluster = caches.terraform_cluster(obj)
        if cluster is not None and cluster_news(old, new, cluster):
            keys += _keys([cluster])
    return keys


def template_wakes(kind: str, old: Obj | None, new: Obj | None) -> list[str]:
    """A template wakes itself, unless only its status changed (the controller's own
    write: the pass that wrote it has nothing left to do)."""
    if old is not None and new is not None and _without_status(old) == _without_status(new):
        return []
    meta = (new or old or {})["metadata"]
    return [key_of(kind, meta["namespace"], meta["name"])]


def _without_status(obj: Obj) -> tuple[Any, Any, Any]:
    meta = obj.get("metadata") or {}
    return obj.get("spec"), meta.get("generation"), meta.get("deletionTimestamp")


def capi_event_wakes(caches: Caches, kind: str, old: Obj | None, new: Obj | None) -> list[str]:
    """A Cluster API object's event: its wakes, unless nothing a pass reads of it changed."""
    return [] if only_capi_version(old, new) else capi_wakes(caches, kind, old, new)


def capi_wakes(caches: Caches, kind: str, old: Obj | None, new: Obj | None) -> list[str]:
    """A Cluster wakes every CAPTF object of it (its TerraformCluster and members); a
    Cluster, Machine or MachinePool, the objects it owns (one it does not name back waits
    for it). Not the object its infrastructureRef names that it does not own: a pass
    reads only its own owner (reads.capi_wanted), and Cluster API's setting the owner
    reference wakes it (issue 31: each new Machine woke its TerraformMachine before it was
    adopted, for a pass that found no owner)."""
    obj = new or old
    assert obj is not None
    meta = obj["metadata"]
    ns, name = meta["namespace"], meta["name"]
    found: list[Json] = []
    if kind == CAPI_CLUSTER:
        found += caches.objects_by(BY_CLUSTER, f"{ns}/{name}")
    found += caches.objects_by(BY_OWNER, f"{ns}/{kind}/{name}")
    return list(dict.fromkeys(_keys(found)))


def job_wakes(old: Obj | None, new: Obj | None) -> list[str]:
    if not job_news(old, new):
        return []
    key = owner_key(new or old or {})
    return [] if key is None else [key]


def plan_wakes(old: Obj | None, new: Obj | None) -> list[str]:
    """A TerraformPlan approved (or changed, deleted, made) wakes its object."""
    if only_plan_status(old, new):
        return []
    key = owner_key(new or old or {})
    return [] if key is None else [key]


def owner_key(job: Obj) -> str | None:
    """The object a CAPTF Job (or TerraformPlan) belongs to, from its labels."""
    labels = job.get("metadata", {}).get("labels") or {}
    kind, name = labels.get(LABEL_KIND), labels.get(LABEL_NAME)
    ns = job.get("metadata", {}).get("namespace")
    if kind not in KINDS or not name or not ns:
        return None
    return key_of(kind, ns, name)


def data_wakes(caches: Caches, kind: str, old: Obj | None, new: Obj | None) -> list[str]:
    obj = new or old
    assert obj is not None
    meta = obj["metadata"]
    ns, name = meta.get("namespace", ""), meta["name"]
    labels = meta.get("labels") or {}
    # What CAPTF wrote (its inputs, a runner's state, plans, backups) wakes no object whose
    # Job is still running: what its runner writes is read when the Job ends (the Job's
    # end wakes it, and the cache has this Secret by then; one that comes after the Job's
    # end wakes it here). Each state, backup and part a destroy writes and removes woke
    # the machine for a pass that found its Job running (issue 31).
    written = labels.get(LABEL_MANAGED_BY) == MANAGER

    def woken(found: Iterable[Json]) -> list[str]:
        return _keys(o for o in found if not (written and _job_running(caches, o)))

    # Objects that read it (module, variables, credentials, their state), the infrastructure
    # of the Machines and MachinePools that take their bootstrap data from it...
    keys = woken(caches.objects_by(BY_REF, f"{ns}/{kind}/{name}"))
    if kind == SECRET:
        for capi in caches.capi_by(BY_REF, f"{ns}/{kind}/{name}"):
            keys += capi_wakes(caches, str(capi.get("kind")), capi, capi)
    # ...the objects of the namespace that run with a mirror's identity, and every user
    # of an identity whose Secret this is, with the identity...
    if kind == SECRET:
        keys += secret_identities(caches, ns, name, labels.get(LABEL_IDENTITY_MIRROR))
    # ...and the object a Secret CAPTF wrote belongs to (inputs, state, plans).
    owner = labels.get(LABEL_NAME) or labels.get(LABEL_PLAN_OF)
    if owner:
        owner_kind = labels.get(LABEL_KIND)
        kinds = [owner_kind] if owner_kind in caches.objects else list(KINDS)
        found = [caches.object(k, ns, owner) for k in kinds]
        keys += woken(o for o in found if o is not None)
    return keys


def _job_running(caches: Caches, obj: Json) -> bool:
    """Whether the object's active Job is in the cache and not finished."""
    active = (obj.get("status") or {}).get("activeJob")
    job = caches.job(obj["metadata"]["namespace"], str(active)) if active else None
    return job is not None and not is_finished(job)


# A freed run slot wakes this many of the objects waiting for one, those waiting longest;
# the rest find a slot by their own wait (LEASE_WAIT). Waking every waiter cost a pass per
# waiting object at each release, hundreds while a MachineDeployment scales, all but one
# finding the slot taken again (issue 31). Two, not one: the first may be unable to take
# it (its cluster at --max-concurrent-runs-per-cluster).
SLOT_WAKES = 2


def lease_wakes(caches: Caches, old: Obj | None, new: Obj | None) -> list[str]:
    """A freed run slot wakes the SLOT_WAKES that have waited longest for one, changes
    first: background Jobs waiting for their share or budget (issue 39) only when fewer
    changes wait, so the next free slot is a change's; and those waiting for an
    operation. A freed operation Lease wakes those of its namespace waiting for an
    operation (a cluster's, or its members'). An operation Lease is freed with each
    Job's end: waking the run-slot waiters too cost a pass per waiting object per Job
    (issue 31), and they wait for the slot that Job frees, which wakes them."""
    if not lease_freed(old, new):
        return []
    lease = new or old or {}
    waiting = caches.objects_by(BY_WAITING, WAITING_FOR_LEASE)
    by_slot = (Reason.WAITING_FOR_RUN_LEASE, Reason.WAITING_FOR_BACKGROUND_BUDGET)
    others = [o for o in waiting if next_reason(o) not in by_slot]
    if not is_run_slot(lease):
        ns = lease.get("metadata", {}).get("namespace")
        return _keys(o for o in others if o["metadata"]["namespace"] == ns)
    changes = [o for o in waiting if next_reason(o) == Reason.WAITING_FOR_RUN_LEASE]
    background = [o for o in waiting if next_reason(o) == Reason.WAITING_FOR_BACKGROUND_BUDGET]
    longest = sorted(changes, key=_waiting_since)[:SLOT_WAKES]
    longest += sorted(background, key=_waiting_since)[: SLOT_WAKES - len(longest)]
    return _keys([*longest, *others])


def _waiting_since(obj: Obj) -> tuple[str, str]:
    """Since when its Waiting condition holds (RFC 3339 sorts as time), then its name."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    since = next(
        (str(c.get("lastTransitionTime") or "") for c in conditions if c.get("type") == "Waiting"),
        "",
    )
    return since, str(obj["metadata"].get("name", ""))


def namespace_wakes(caches: Caches, old: Obj | None, new: Obj | None) -> list[str]:
    """A Namespace whose labels changed (or that came or went): an identity's selector may
    now allow or refuse it."""
    labels = [((o or {}).get("metadata") or {}).get("labels") for o in (old, new)]
    if old is not None and new is not None and labels[0] == labels[1]:
        return []
    ns = (new or old or {})["metadata"]["name"]
    keys = []
    for identity in caches.identities.store:
        name = identity["metadata"]["name"]
        keys += [identity_key(name), *_keys(identity_users(caches, name, ns))]
    denied = caches.objects_by(BY_WAITING, WAITING_FOR_POLICY)
    return keys + _keys(o for o in denied if o["metadata"]["namespace"] == ns)


def policy_wakes(caches: Caches, old: Obj | None, new: Obj | None) -> list[str]:
    """A policy's rules or selectors changed, or it came or went: the objects denied by a
    policy decide again (their wait lasts only while their policy set is the one that
    denied). Found by the waiting index, never by a scan."""
    if old is not None and new is not None and old.get("spec") == new.get("spec"):
        return []
    return _keys(caches.objects_by(BY_WAITING, WAITING_FOR_POLICY))


def pod_wakes(old: Obj | None, new: Obj | None) -> list[str]:
    """A runner pod carries its object's kind and name labels, as its Job does. A pass
    reads a Pending pod for its image pull failure (core's `pull_failure`), and that one
    exists (a Job's FailedCreate is over): it wakes the object when it appears, and when
    its pull failure comes, changes or goes, not on each step of its start (issue 31)."""
    key = owner_key(new or old or {})
    if key is None or new is None:
        return []
    return [key] if old is None or pull_failure(old) != pull_failure(new) else []


def event_wakes(caches: Caches, old: Obj | None, new: Obj | None) -> list[str]:
    event = new or old or {}
    involved = event.get("involvedObject") or {}
    job = caches.job(event.get("metadata", {}).get("namespace", ""), involved.get("name", ""))
    key = owner_key(job) if job is not None and new is not None else None
    return [] if key is None else [key]


def account_wakes(caches: Caches, old: Obj | None, new: Obj | None) -> list[str]:
    """The watch shows only accounts labelled captf.io/runner=true: an add is an opt-in,
    a delete an opt-out (or the account gone)."""
    meta = (new or old or {}).get("metadata", {})
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    return _keys(caches.objects_by(BY_ACCOUNT, f"{ns}/{name}"))


def _keys(objects: Iterable[Json]) -> list[str]:
    return [key_for(obj) for obj in objects]
