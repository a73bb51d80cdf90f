"""One object of CAPTF's group, as another served version: what the conversion webhook
answers and what `captf decide -f` reads a v1alpha1 snapshot with.

v1beta1 is the hub (the storage version); v1alpha1 converts to it and from it by the
changes of changes.py, applied to the object's inputs spec. Everything else (metadata,
status, the specs of identities and plans) is the same in both versions, so only
apiVersion changes. What v1beta1 cannot hold of a v1alpha1 object is kept as JSON in the
ANN_CONVERSION_DATA annotation of its v1beta1 form, and given back (and the annotation
dropped) when it is read as v1alpha1 again: the API server lets a conversion change no
metadata but labels and annotations."""

from __future__ import annotations

import copy
import json
from typing import Final

from controller.core.basics.names import (
    ANN_CONVERSION_DATA,
    GROUP,
    KINDS,
    OLD_VERSION,
    VERSION,
)
from controller.core.conversion.changes import CHANGES, Change
from runtime.jsonobj import Json

VERSIONS: Final = (OLD_VERSION, VERSION)
# A template's spec.template.spec is the spec of the kind it is named after.
TEMPLATE_OF: Final = {f"{kind}Template": kind for kind in KINDS}


class ConversionFailed(ValueError):
    """The object cannot be converted as asked; the message says why, naming no value."""


def convert(obj: Json, api_version: str) -> Json:
    """`obj` as `api_version`; `obj` is left as it is. The answer is a new object whose
    spec and metadata are copies (what a conversion writes) and whose other parts (the
    status, most of the size) are `obj`'s own: neither may be changed after. The API
    server asks for a conversion on every write while v1alpha1 is served
    (docs/performance.md), and a deep copy of the whole object was most of the
    conversion's own cost."""
    group, _, version = api_version.rpartition("/")
    have = str(obj.get("apiVersion") or "")
    have_group, _, have_version = have.rpartition("/")
    if group != GROUP or version not in VERSIONS:
        raise ConversionFailed(f"cannot convert to {api_version}: not a version of {GROUP}")
    if have_group != GROUP or have_version not in VERSIONS:
        raise ConversionFailed(f"cannot convert from {have or 'no apiVersion'}")
    out = _writable(obj)
    out["apiVersion"] = api_version
    if have_version == version:
        return out
    kind = str(obj.get("kind") or "")
    spec = _inputs_spec(kind, out)
    if have_version == OLD_VERSION:
        _up(kind, out, spec)
    else:
        _down(kind, out, spec)
    return out


def _writable(obj: Json) -> Json:
    """A new top level with copies of what `_up` and `_down` write: the spec, deeply
    (a change moves fields within it), and the metadata's own level (its annotations
    are replaced whole, never changed in place)."""
    out = dict(obj)
    if "spec" in out:
        out["spec"] = copy.deepcopy(out["spec"])
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = dict(out["metadata"])
    return out


def _changes(kind: str) -> tuple[Change, ...]:
    of = TEMPLATE_OF.get(kind, kind)
    return tuple(change for change in CHANGES if of in change.kinds)


def _inputs_spec(kind: str, obj: Json) -> Json | None:
    spec = obj.get("spec")
    if kind in TEMPLATE_OF:
        template = spec.get("template") if isinstance(spec, dict) else None
        spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else None


def _up(kind: str, obj: Json, spec: Json | None) -> None:
    kept: Json = {}
    if spec is not None:
        for change in _changes(kind):
            found = change.up(spec)
            if found is not None:
                kept[change.name] = found
    notes = _annotations(obj)
    if not kept and ANN_CONVERSION_DATA not in notes:
        return
    # A v1alpha1 object never carries it (down drops it): one that does was written by
    # hand and says nothing of this object.
    notes.pop(ANN_CONVERSION_DATA, None)
    if kept:
        notes[ANN_CONVERSION_DATA] = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    _set_annotations(obj, notes)


def _down(kind: str, obj: Json, spec: Json | None) -> None:
    notes = _annotations(obj)
    kept = _kept(notes.pop(ANN_CONVERSION_DATA, None))
    if spec is not None:
        for change in reversed(_changes(kind)):
            found = kept.get(change.name)
            change.down(spec, found if isinstance(found, dict) else None)
    if ANN_CONVERSION_DATA in _annotations(obj):
        _set_annotations(obj, notes)


def _kept(value: object) -> Json:
    """The annotation's JSON; nothing when it is not ours to read (written by hand)."""
    if not isinstance(value, str):
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _annotations(obj: Json) -> Json:
    meta = obj.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    return dict(notes) if isinstance(notes, dict) else {}


def _set_annotations(obj: Json, notes: Json) -> None:
    """The annotations made `notes`; none left, no annotations at all (as the API server
    stores an empty map)."""
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        return
    if notes:
        meta["annotations"] = notes
    else:
        meta.pop("annotations", None)
