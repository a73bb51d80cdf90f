"""A snapshot: one CAPTF object and everything DecideOp reads about it.

The controller fills it from its caches, `captf decide -f` from a file; the
decision cannot tell the difference. It holds only what the cluster shows: the
operator's flags are the Settings (controller/core/decide/settings.py), what this
process remembers and reads live the Facts (controller/core/decide/facts.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from controller.core.basics.names import (
    ANN_INTERRUPTED_APPLY,
    CAPI_KINDS,
    IDENTITY,
    KINDS,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_UID,
    PLAN_KIND,
    POLICY_KIND,
    inputs_secret_prefix,
    labelled_for,
    legacy_inputs_secret_prefix,
    legacy_state_secret_name,
    state_secret_name,
)
from controller.core.basics.redact import Redactor
from controller.core.decide import reads
from controller.core.jobs.history import History
from controller.core.jobs.job import annotations_of, labels_of, name_of, op_of, result
from controller.core.jobs.job_env import job_env
from controller.core.jobs.naming import fresh_seq, job_name
from controller.core.jobs.sensitive import env_redactor, redactor_key
from controller.core.spec.identity import (
    NO_IDENTITY,
    IdentityRef,
    IdentityView,
    identity_ref_of,
    secret_ref_of,
)
from runtime.jsonobj import Json


def _empty() -> Mapping[Any, Json]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Snapshot:
    """Read-only: its containers are tuples and read-only mappings (`build` and
    `Caches.snapshot` make them so), and nothing writes into the objects, which may be
    the caches' own. A pass that needs another view makes a new snapshot (`dataclasses.replace`)."""

    obj: Json
    jobs: tuple[Json, ...] = ()
    secrets: Mapping[str, Json] = field(default_factory=_empty)
    configmaps: Mapping[str, Json] = field(default_factory=_empty)
    leases: tuple[Json, ...] = ()
    # Other objects of the namespace by (kind, name), an ObjectRef: the CAPTF cluster, the
    # dependencies and (for a cluster) the members; the Cluster API owner and Cluster
    # (controller/core/decide/owners.py).
    related: Mapping[tuple[str, str], Json] = field(default_factory=_empty)
    # The identity the object (or its cluster) names, as io read it: the identity, its
    # Secret's key names, the namespace's labels (controller/core/spec/identity.py).
    identity: IdentityView = NO_IDENTITY
    # The object's TerraformPlans (controller/core/decide/approvals.py).
    plans: tuple[Json, ...] = ()
    # What says a running Job cannot start (controller/core/jobs/starting.py): the Job
    # controller's FailedCreate Events about the object's Jobs, and their Pending pods.
    events: tuple[Json, ...] = ()
    pods: tuple[Json, ...] = ()
    # Every TerraformPolicy (cluster-scoped, few), and the labels of the object's
    # Namespace: which select it is the core's (controller/core/spec/plan_policies.py).
    policies: tuple[Json, ...] = ()
    namespace_labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def name(self) -> str:
        return name_of(self.obj)

    @property
    def namespace(self) -> str:
        return str(self.obj.get("metadata", {}).get("namespace", ""))

    @property
    def uid(self) -> str:
        return str(self.obj.get("metadata", {}).get("uid", ""))

    @property
    def deleting(self) -> bool:
        return bool(self.obj.get("metadata", {}).get("deletionTimestamp"))

    @property
    def spec(self) -> Json:
        return self.obj.get("spec") or {}

    @property
    def status(self) -> Json:
        return self.obj.get("status") or {}

    @property
    def annotations(self) -> dict[str, str]:
        return annotations_of(self.obj)

    @property
    def state_name(self) -> str:
        """The state Secret's name (controller/core/basics/names.py)."""
        return state_secret_name(self.namespace, self.kind, self.name)

    @property
    def state_secret(self) -> Json | None:
        """The state Secret, labelled for this object: under its name, else (until it is
        moved, controller/core/plan/state_moves.py) under the name before kinds were part
        of it. The moved copy is written before the old one goes, so a pass sees one or
        the other, never neither."""
        return self.state_of(self.kind, self.name)

    def state_of(self, kind: str, name: str) -> Json | None:
        """The state Secret of an object of this namespace (its own, or its cluster's)."""
        for secret in (
            state_secret_name(self.namespace, kind, name),
            legacy_state_secret_name(name),
        ):
            found = self.secrets.get(secret)
            if found is not None and labelled_for(found, kind, name):
                return found
        return None

    @property
    def state_shown(self) -> str:
        """The state Secret's name for a message: the one found, else the one to write."""
        found = self.state_secret
        return name_of(found) if found is not None else self.state_name

    @property
    def identity_ref(self) -> IdentityRef | None:
        """The object's identityRef, or its cluster's for a machine or pool without one."""
        return identity_ref_of(self.obj, self.related)

    def inputs_secrets(self) -> list[Json]:
        """The durable inputs Secrets labelled for this object (and those named the way
        before kinds were part of the name)."""
        prefixes = (
            inputs_secret_prefix(self.namespace, self.kind, self.name),
            legacy_inputs_secret_prefix(self.name),
        )
        return [
            s
            for n, s in sorted(self.secrets.items())
            if n.startswith(prefixes) and labelled_for(s, self.kind, self.name)
        ]

    def backups(self) -> list[Json]:
        """The state's backups (`<state>-<serial>`, labelled captf.io/state-backup-of and
        with the object's kind)."""
        return [
            s
            for _, s in sorted(self.secrets.items())
            if labels_of(s).get(LABEL_BACKUP_OF) == self.name
            and labels_of(s).get(LABEL_KIND) == self.kind
        ]

    def job_names(self) -> set[str]:
        return {name_of(j) for j in self.jobs}

    @cached_property
    def history(self) -> History:
        """The finished Jobs, classified: built once per snapshot, however many rules of
        one pass read it (a new view, `with_`, is a new snapshot and builds its own)."""
        return History(self.jobs, self.plan_readable, self.redactor)

    def redactor(self, job: Json) -> Redactor:
        """Removes the values of the Secrets a Job carried from the messages built from it.
        Jobs that carried the same Secrets share one (reading a module of up to 1 MiB once
        per pass, not once per Job)."""
        env = job_env(job)
        key = redactor_key(env)
        if key not in self._redactors:
            self._redactors[key] = env_redactor(env, self.secrets)
        return self._redactors[key]

    @cached_property
    def _redactors(self) -> dict[tuple[str, tuple[str, ...], tuple[str, ...]], Redactor]:
        """The Redactors made in this snapshot, by redactor_key: a memo of what the
        snapshot's Secrets already decide, not a change of the snapshot."""
        return {}

    def next_job(self, op: str) -> tuple[str, int]:
        """The name and attempt sequence of the op's next Job: past every Job there is, and
        past an apply recorded as deleted while it ran (its name is not reused). The one
        place the next name is computed: the launch, and the Leases it may find held in
        that name."""
        uid = str(self.obj.get("metadata", {}).get("uid", ""))
        gone = {annotations_of(s).get(ANN_INTERRUPTED_APPLY) or "" for s in self.inputs_secrets()}
        seq = fresh_seq(self.name, uid, self.jobs, op, gone - {""})
        return job_name(self.name, uid, op, seq), seq

    def plan_readable(self, job: Json) -> bool:
        """A plan Job's plan Secret, named in its result, exists and has data."""
        name = (result(job) or {}).get("planSecret")
        secret = self.secrets.get(str(name)) if name else None
        return secret is not None and bool(secret.get("data"))


def owns(obj: Json, job: Json) -> bool:
    """Whether a Job belongs to the object: in its namespace, and by uid label, else
    name/kind labels, else owner reference, else its name (a Job of an earlier object of
    the same name carries another uid)."""
    meta = obj.get("metadata", {})
    uid, name, kind = meta.get("uid"), meta.get("name"), obj.get("kind")
    if job.get("metadata", {}).get("namespace", meta.get("namespace")) != meta.get("namespace"):
        return False
    job_labels = labels_of(job)
    if uid and job_labels.get(LABEL_UID):
        return bool(job_labels[LABEL_UID] == uid)
    if job_labels.get(LABEL_NAME):
        return job_labels[LABEL_NAME] == name and job_labels.get(LABEL_KIND, kind) == kind
    refs = job.get("metadata", {}).get("ownerReferences") or []
    for ref in refs:
        if ref.get("kind") == kind and ref.get("name") == name:
            return not uid or not ref.get("uid") or ref.get("uid") == uid
    # Neither labels nor owners (a hand-made snapshot): the `<name>-<op>-<hash8>` name.
    job_name = name_of(job)
    return not refs and bool(name) and job_name.startswith(f"{name}-") and bool(op_of(job))


def build(obj: Json, others: Iterable[Json]) -> Snapshot:
    """Sorts a flat list of API objects into a snapshot of `obj`, keeping of its Secrets,
    ConfigMaps and related objects those the one read list names (reads.py), as the
    controller's caches do: a decision reads the same from a file as from the caches."""
    namespace = obj.get("metadata", {}).get("namespace")
    jobs, leases, plans, events, pods, policies = [], [], [], [], [], []
    secrets: dict[str, Json] = {}
    configmaps: dict[str, Json] = {}
    candidates: dict[tuple[str, str], Json] = {}
    elsewhere: list[Json] = []  # identities, Namespaces, other namespaces' Secrets
    for item in others:
        kind = item.get("kind")
        same_ns = item.get("metadata", {}).get("namespace", namespace) == namespace
        if kind == "Job" and owns(obj, item):
            jobs.append(item)
        elif kind == PLAN_KIND and owns(obj, item):
            plans.append(item)
        elif kind == "Secret" and same_ns:
            secrets[name_of(item)] = item
        elif kind == "ConfigMap" and same_ns:
            configmaps[name_of(item)] = item
        elif kind == "Lease":
            leases.append(item)
        elif kind == "Event" and same_ns:
            events.append(item)
        elif kind == "Pod" and same_ns:
            pods.append(item)
        elif kind == POLICY_KIND:
            policies.append(item)
        elif (kind in KINDS or kind in CAPI_KINDS) and same_ns and item is not obj:
            candidates[(str(kind), name_of(item))] = item
        else:
            elsewhere.append(item)
    related = _related(obj, candidates)
    named = set(reads.secrets_wanted(obj, jobs, related))
    named |= set(reads.state_parts_wanted(obj, named, secrets.get))
    kept = {n: s for n, s in secrets.items() if n in named or reads.owns_secret(obj, s)}
    wanted_maps = reads.configmaps_wanted(obj)
    return Snapshot(
        obj=obj,
        jobs=tuple(jobs),
        secrets=MappingProxyType(kept),
        configmaps=MappingProxyType({n: c for n, c in configmaps.items() if n in wanted_maps}),
        leases=tuple(leases),
        related=MappingProxyType(related),
        identity=_identity_view(identity_ref_of(obj, related), str(namespace or ""), elsewhere),
        plans=tuple(plans),
        events=tuple(events),
        pods=tuple(pods),
        policies=tuple(policies),
        namespace_labels=MappingProxyType(_namespace_labels(str(namespace or ""), elsewhere)),
    )


def _namespace_labels(namespace: str, items: list[Json]) -> dict[str, str]:
    for item in items:
        meta = item.get("metadata") or {}
        if item.get("kind") == "Namespace" and meta.get("name") == namespace:
            return dict(meta.get("labels") or {})
    return {}


def _related(obj: Json, candidates: Mapping[tuple[str, str], Json]) -> dict[tuple[str, str], Json]:
    """Of the namespace's CAPTF and Cluster API objects, those the read list names."""
    related: dict[tuple[str, str], Json] = {
        ref: reads.capi_read(candidates[ref]) for ref in reads.capi_wanted(obj) if ref in candidates
    }
    wanted, members_of = reads.captf_wanted(obj, related)
    related |= {ref: candidates[ref] for ref in wanted if ref in candidates}
    related |= {
        ref: other
        for ref, other in candidates.items()
        if other.get("kind") in KINDS and reads.is_member(obj, members_of, other)
    }
    return related


def _identity_view(ref: IdentityRef | None, namespace: str, items: list[Json]) -> IdentityView:
    """The identity facts a flat list holds: the named TerraformClusterIdentity, the
    object's Namespace, and the identity's Secret (its key names)."""
    if ref is None or ref.kind != IDENTITY:
        return NO_IDENTITY

    def find(kind: str, ns: str, name: str) -> Json | None:
        for item in items:
            meta = item.get("metadata") or {}
            if (item.get("kind"), meta.get("namespace", ""), meta.get("name")) == (kind, ns, name):
                return item
        return None

    identity = find(IDENTITY, "", ref.name)
    space = find("Namespace", "", namespace) or {}
    labels = (space.get("metadata") or {}).get("labels") or {}
    secret = find("Secret", *secret_ref_of(identity)) if identity is not None else None
    keys = (
        None
        if secret is None
        else frozenset({**(secret.get("data") or {}), **(secret.get("stringData") or {})})
    )
    return IdentityView(identity, keys, MappingProxyType(dict(labels)))
