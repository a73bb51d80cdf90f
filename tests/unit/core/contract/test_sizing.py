"""Who sizes a pool's group (issue 37): Cluster API's `replicas-managed-by`, the user's,
says the cloud does; the cluster-autoscaler's min/max annotations alone only bound
spec.replicas. CAPTF's own old claim is recognised by who wrote it, through capi_read."""

from __future__ import annotations

import pytest

from controller.core.contract import sizing
from controller.core.contract.sizing import (
    AUTOSCALING_ACTIVE,
    AUTOSCALING_DISABLED,
    AUTOSCALING_INVALID,
    CLAIM_WRITERS,
    REPLICAS_FROM_SPEC,
)
from controller.core.decide.reads import capi_read
from controller.core.plan import replicas
from runtime.jsonobj import Json
from tests.capi_builders import annotation_writers
from tests.paths import REPO

MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
MANAGED = "cluster.x-k8s.io/replicas-managed-by"
BOUNDS = {MIN: "1", MAX: "5"}
OFF = {"enabled": False, "min": 0, "max": 0}


def _pool(annotations: dict[str, str], *, writers: list[tuple[str, str]] | None = None) -> Json:
    """A MachinePool as the API returns it; `writers` the (manager, operation) entries of
    its managedFields that own the replicas-managed-by annotation."""
    metadata: Json = {"name": "p1", "namespace": "team-a", "annotations": annotations}
    if writers is not None:
        metadata["managedFields"] = annotation_writers(MANAGED, writers)
    return {"metadata": metadata, "spec": {"replicas": 3}}


@pytest.mark.parametrize(
    ("annotations", "expected", "reason"),
    [
        ({}, OFF, AUTOSCALING_DISABLED),
        # The autoscaler's annotations alone: spec.replicas is the size, bounded.
        (BOUNDS, OFF, REPLICAS_FROM_SPEC),
        ({MIN: "0", MAX: "0"}, OFF, REPLICAS_FROM_SPEC),
        # The user's annotation, any value but "false": the cloud sizes the group.
        (BOUNDS | {MANAGED: "cloud"}, {"enabled": True, "min": 1, "max": 5}, AUTOSCALING_ACTIVE),
        (BOUNDS | {MANAGED: ""}, {"enabled": True, "min": 1, "max": 5}, AUTOSCALING_ACTIVE),
        (BOUNDS | {MANAGED: "captf"}, {"enabled": True, "min": 1, "max": 5}, AUTOSCALING_ACTIVE),
        (BOUNDS | {MANAGED: "false"}, OFF, REPLICAS_FROM_SPEC),
        ({MANAGED: "cloud"}, OFF, AUTOSCALING_INVALID),  # no bounds to give the cloud
        ({MANAGED: "false"}, OFF, AUTOSCALING_DISABLED),
        ({MIN: "1"}, OFF, AUTOSCALING_INVALID),
        ({MIN: "6", MAX: "5", MANAGED: "cloud"}, OFF, AUTOSCALING_INVALID),
        ({MIN: "-1", MAX: "5"}, OFF, AUTOSCALING_INVALID),
        ({MIN: "x", MAX: "5"}, OFF, AUTOSCALING_INVALID),
    ],
)
def test_who_sizes_the_group(annotations: dict[str, str], expected: Json, reason: str) -> None:
    got = sizing.autoscaling_of(_pool(annotations))
    assert got.as_input() == expected
    assert got.reason == reason
    assert not got.old_claim


CAPTF = [("Python", "Update")]


@pytest.mark.parametrize(
    ("value", "writers", "ours"),
    [
        ("captf", CAPTF, True),  # the value CAPTF wrote, by CAPTF's write alone
        ("captf", [("Python", "Update"), ("kubectl", "Apply")], False),  # a user applies it too
        ("captf", [("kubectl-annotate", "Update")], False),  # a user annotated it
        ("captf", [("argocd-controller", "Apply")], False),
        ("captf", [("Python", "Apply")], False),
        ("captf", [("clusterctl", "Update")], False),  # moved: who wrote it is unknown
        ("captf", [], False),  # no entry owns it
        ("captf", None, False),  # no managedFields read (a file without them)
        ("cloud", CAPTF, False),  # a value CAPTF never wrote
    ],
)
def test_the_old_claim_is_ours_only_by_value_and_writer(
    value: str, writers: list[tuple[str, str]] | None, ours: bool
) -> None:
    """Read as the controller reads it: through capi_read, which keeps the writers of the
    annotation (and drops managedFields), and again from the cache's copy."""
    read = capi_read(_pool(BOUNDS | {MANAGED: value}, writers=writers))
    assert "managedFields" not in read["metadata"]
    again = capi_read(read)
    for pool in (read, again):
        assert sizing.old_claim(pool) is ours
        scaling = sizing.autoscaling_of(pool)
        assert scaling.old_claim is ours
        # Ours is read as absent: spec.replicas is the size; anyone else's stands.
        assert scaling.enabled is not ours
        assert scaling.reason == (REPLICAS_FROM_SPEC if ours else AUTOSCALING_ACTIVE)


def test_only_the_old_claims_value_keeps_writers() -> None:
    """Every other MachinePool reads as before: no record of managedFields at all."""
    read = capi_read(_pool(BOUNDS | {MANAGED: "cloud"}, writers=CAPTF))
    assert CLAIM_WRITERS not in read["metadata"]
    read = capi_read(_pool(BOUNDS | {MANAGED: "captf"}, writers=CAPTF))
    assert read["metadata"][CLAIM_WRITERS] == [{"manager": "Python", "operation": "Update"}]


@pytest.mark.parametrize(
    ("annotations", "replicas", "status", "says"),
    [
        ({}, 3, "False", "no autoscaler annotations"),
        (BOUNDS, 3, "False", "bounded by the autoscaler's annotations to [1, 5]"),
        (BOUNDS, 8, "False", "8 is out of bounds, the group is sized 5"),
        (BOUNDS | {MANAGED: "cloud"}, 3, "True", "the cloud sizes the group between 1 and 5"),
        (BOUNDS | {MANAGED: "captf"}, 3, "True", "if nobody here set it, remove it"),
        ({MANAGED: "cloud"}, 3, "False", "replicas-managed-by is set, but"),
    ],
)
def test_the_condition_says_who_sizes_the_group(
    annotations: dict[str, str], replicas: int, status: str, says: str
) -> None:
    pool = _pool(annotations) | {"spec": {"replicas": replicas}}
    got = sizing.condition_of(pool)
    assert got[0] == status
    assert says in got[2]


def test_the_docs_name_every_reason_and_event() -> None:
    """clusterapi.md's "Who sizes a pool" names each AutoscalingActive reason and both
    Events of the write to the MachinePool; the Events tables list them."""
    page = (REPO / "docs" / "clusterapi.md").read_text()
    section = page[page.index("## Who sizes a pool") :]
    section = section[: section.index("\n## ")]
    for reason in (
        AUTOSCALING_ACTIVE,
        AUTOSCALING_DISABLED,
        REPLICAS_FROM_SPEC,
        AUTOSCALING_INVALID,
    ):
        assert f"`{reason}`" in section, reason
    for event in (replicas.WRITTEN, replicas.WITHDRAWN):
        assert f"`{event}`" in section, event
        for table in ("api.md", "observability.md"):
            assert f"| `{event}` |" in (REPO / "docs" / table).read_text(), (event, table)
