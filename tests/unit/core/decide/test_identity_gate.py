"""An identity that does not let the object run holds every Job, a destroy included; the
Job of one that does gets the namespace's mirror Secret as environment and as files."""

from __future__ import annotations

import pytest

from controller.core.basics.names import CLUSTER, FINALIZER, IDENTITY, MACHINE
from controller.core.decide import snapshot
from controller.core.decide.decision import Requeue, Run
from controller.core.decide.steps import decide
from controller.core.plan.planner import plan_pass
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    NS,
    ago,
    base_objects,
    captf,
    module_configmap,
    owners_of,
    secret,
    state,
)

ON_AWS: Json = {"identityRef": {"kind": IDENTITY, "name": "aws"}}


def identity(allowed: list[str], required: list[str] | None = None) -> Json:
    spec: Json = {
        "secretRef": {"namespace": "captf-system", "name": "aws"},
        "allowedNamespaces": {"list": allowed},
    }
    if required:
        spec["requiredKeys"] = required
    return {"kind": IDENTITY, "metadata": {"name": "aws"}, "spec": spec}


def source(**data: str) -> Json:
    found = secret("aws", data or {"TOKEN": "s3cr3t-value"})
    found["metadata"]["namespace"] = "captf-system"
    return found


def world(*, allowed: list[str], mirror: bool = True, **keys: str) -> list[Json]:
    out = [*base_objects(applied=False), identity(allowed, ["TOKEN"]), source(**keys)]
    return out + ([secret("captf-creds-aws", {"TOKEN": "s3cr3t-value"})] if mirror else [])


@pytest.mark.parametrize(
    ("others", "reason", "after"),
    [
        (world(allowed=["team-b"]), "NamespaceNotAllowed", 300.0),
        (world(allowed=[NS], OTHER="x"), "SecretKeysMissing", 300.0),
        ([*base_objects(applied=False), source()], "IdentityNotFound", 300.0),
        (world(allowed=[NS], mirror=False), None, 30.0),
    ],
)
def test_no_job_runs_until_the_identity_allows_it(
    others: list[Json], reason: str | None, after: float
) -> None:
    snap = snapshot.build(captf(spec=ON_AWS), others)
    decision = decide(snap, NOW)
    assert isinstance(decision, Requeue)
    assert (decision.reason, decision.after, decision.op) == ("CredentialsNotReady", after, "apply")
    todo = plan_pass(snap, NOW)
    assert todo.launch is None
    cond = [c for c in todo.status["conditions"] if c["type"] == "IdentityAllowed"]  # type: ignore[index]
    if reason is None:  # allowed; the mirror is on its way
        assert cond[0]["status"] == "True"
        assert "captf-creds-aws" in decision.message
    else:
        assert (cond[0]["status"], cond[0]["reason"]) == ("False", reason)
        assert f"({reason})" in decision.message


def test_a_destroy_waits_for_the_identity_too() -> None:
    obj = captf(spec=ON_AWS, deleting=ago(minutes=1), finalizers=[FINALIZER])
    others = [*world(allowed=["team-b"]), state(serial=1)]
    decision = decide(snapshot.build(obj, others), NOW)
    assert isinstance(decision, Requeue)
    assert (decision.reason, decision.op) == ("CredentialsNotReady", "destroy")


def test_an_allowed_identity_s_job_gets_the_mirror_as_env_and_files() -> None:
    snap = snapshot.build(captf(spec=ON_AWS), world(allowed=[NS]))
    todo = plan_pass(snap, NOW)
    assert isinstance(todo.decision, Run)
    assert todo.launch is not None
    pod = todo.launch.job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["envFrom"] == [{"secretRef": {"name": "captf-creds-aws"}}]
    volume = next(v for v in pod["volumes"] if v["name"] == "credentials")
    assert volume["secret"] == {"secretName": "captf-creds-aws", "defaultMode": 0o440}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "credentials")
    assert mount == {
        "name": "credentials",
        "mountPath": "/var/run/captf/credentials",
        "readOnly": True,
    }
    assert pod["securityContext"]["fsGroup"] == 65532
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CAPTF_CREDENTIALS_SECRET"] == "captf-creds-aws"
    assert env["CAPTF_CREDENTIALS_DIR"] == "/var/run/captf/credentials"
    cond = [c for c in todo.status["conditions"] if c["type"] == "IdentityAllowed"]  # type: ignore[index]
    assert cond[0]["status"] == "True"


def test_a_machine_inherits_its_cluster_s_identity() -> None:
    member = captf(MACHINE, "m1", spec={"identityRef": None})
    cluster = captf(CLUSTER, "c1", spec=ON_AWS, ready=True)
    others = [*owners_of(member), cluster, module_configmap("m1"), *world(allowed=["team-b"])]
    snap = snapshot.build(member, others)
    assert snap.identity_ref is not None
    assert snap.identity_ref.name == "aws"
    decision = decide(snap, NOW)
    assert isinstance(decision, Requeue)
    assert "NamespaceNotAllowed" in decision.message


def test_no_secret_value_reaches_the_status_or_the_message() -> None:
    for others in (world(allowed=["team-b"]), world(allowed=[NS], OTHER="x"), world(allowed=[NS])):
        todo = plan_pass(snapshot.build(captf(spec=ON_AWS), others), NOW)
        text = repr(todo.status) + repr(todo.events) + repr(todo.decision)
        assert "s3cr3t-value" not in text
        assert "czNjcjN0LXZhbHVl" not in text  # nor its base64


def test_the_kind_secret_form_keeps_the_older_wait() -> None:
    spec = {"identityRef": {"kind": "Secret", "name": "mine"}}
    decision = decide(snapshot.build(captf(spec=spec), base_objects(applied=False)), NOW)
    assert isinstance(decision, Requeue)
    assert (decision.reason, decision.message) == (
        "CredentialsNotReady",
        "credentials Secret mine not found",
    )
