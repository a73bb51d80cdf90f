"""What v1beta1 changes of v1alpha1: the one list both the CRDs and the conversions read.

`make chart` writes each CRD's v1beta1 schema from its v1alpha1 schema with these changes
applied (controller/dev/crd_versions.py); the conversion webhook converts objects by the
same changes (convert.py). A field added to v1alpha1 is therefore in v1beta1 too, with one
edit, and converts as it is. Each change says why in docs/api.md ("v1beta1").

A change acts on an object's inputs spec: `spec` of the three kinds, `spec.template.spec`
of their templates. `up` turns a v1alpha1 spec into its v1beta1 form in place and returns
what v1beta1 has no field for (None when nothing), which the object keeps in its
ANN_CONVERSION_DATA annotation; `down` turns a v1beta1 spec back, given what was kept
(None when nothing was), so v1alpha1 -> v1beta1 -> v1alpha1 gives every field back and
v1beta1 -> v1alpha1 -> v1beta1 needs nothing kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from controller.core.basics.names import CLUSTER, KINDS
from runtime.jsonobj import Json

SECRET: Final = "Secret"


@dataclass(frozen=True)
class Rule:
    """A CEL rule of a spec's x-kubernetes-validations, with its message."""

    rule: str
    message: str


class Change(Protocol):
    """One difference of v1beta1 from v1alpha1 in the inputs spec of `kinds`."""

    @property
    def name(self) -> str:
        """The key of what `up` keeps, in the conversion annotation."""
        ...

    @property
    def kinds(self) -> frozenset[str]: ...

    def schema(self, kind: str, spec: Json) -> None:
        """Make the v1alpha1 spec schema `spec` of `kind` the v1beta1 one (in place)."""
        ...

    def up(self, spec: Json) -> Json | None: ...

    def down(self, spec: Json, kept: Json | None) -> None: ...


class SchemaMismatch(ValueError):
    """The v1alpha1 schema no longer holds what a change expects: the change must follow."""


@dataclass(frozen=True)
class CredentialsRefFolded:
    """spec.credentialsRef, deprecated since identities came (docs/api.md), is gone from
    v1beta1: it always meant identityRef{kind: Secret, name}, and two fields for one
    reference needed a rule against setting both and a second reader of each. Up, it
    becomes that identityRef; an object that set both (stored before the rule) keeps its
    identityRef, which was the one in force."""

    name: str = "credentialsRef"
    kinds: frozenset[str] = frozenset(KINDS)
    # The v1alpha1 rules about it, and what each becomes (None: dropped).
    rules: tuple[tuple[str, Rule | None], ...] = (
        ("!(has(self.identityRef) && has(self.credentialsRef))", None),
        (
            "has(self.identityRef) || has(self.credentialsRef)",
            Rule(
                "has(self.identityRef)",
                "spec.identityRef is required; the cluster's machines and pools run with it"
                " when they name none",
            ),
        ),
    )
    # The kinds whose spec carries each rule (a machine or pool may run with its
    # cluster's credentials, so only a cluster must name some).
    rule_kinds: tuple[frozenset[str], ...] = (frozenset(KINDS), frozenset({CLUSTER}))

    def schema(self, kind: str, spec: Json) -> None:
        properties = spec.get("properties") or {}
        if self.name not in properties:
            raise SchemaMismatch(f"{kind} spec has no {self.name} to remove")
        del properties[self.name]
        rules = spec.get("x-kubernetes-validations") or []
        replaced = dict(self.rules)
        for (old, _), owners in zip(self.rules, self.rule_kinds, strict=True):
            if kind in owners and old not in (r.get("rule") for r in rules):
                raise SchemaMismatch(f"{kind} spec has no rule {old!r}")
        kept: list[Json] = []
        for rule in rules:
            if rule.get("rule") not in replaced:
                kept.append(rule)
            elif (new := replaced[rule["rule"]]) is not None:
                kept.append({"rule": new.rule, "message": new.message})
        if kept:
            spec["x-kubernetes-validations"] = kept
        else:
            spec.pop("x-kubernetes-validations", None)

    def up(self, spec: Json) -> Json | None:
        if self.name not in spec:
            return None
        ref = spec.pop(self.name)
        name = ref.get("name") if isinstance(ref, dict) else None
        if "identityRef" in spec or not isinstance(name, str):
            return {"ref": ref}
        into = {"kind": SECRET, "name": name}
        spec["identityRef"] = into
        return {"ref": ref, "into": into}

    def down(self, spec: Json, kept: Json | None) -> None:
        if kept is None or "ref" not in kept:
            return
        if "into" in kept:
            # Only while the identityRef is still the one it became: one changed since
            # (through v1beta1) is the reference in force, and stays.
            if spec.get("identityRef") != kept["into"]:
                return
            del spec["identityRef"]
        spec[self.name] = kept["ref"]


# In order: up applies them first to last, down last to first.
CHANGES: Final[tuple[Change, ...]] = (CredentialsRefFolded(),)
