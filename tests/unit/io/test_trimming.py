"""What the caches keep of a Job and of a Secret CAPTF wrote: what the rules read, and no more."""

from __future__ import annotations

import base64
import copy

import orjson
import pytest

from controller.core.basics.names import (
    ANN_INPUTS_HASH,
    ANN_RESULT,
    CLUSTER,
    DATA_BYTES,
    LABEL_BACKUP_OF,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_OP,
    LABEL_OUTPUTS_OF,
    LABEL_PLAN_OF,
    LABEL_UID,
    MANAGED_BY,
    STATE_OUTPUTS_KEY,
    STATE_OUTPUTS_LIMIT,
    state_secret_name,
)
from controller.core.decide.snapshot import owns
from controller.core.jobs import job as job_rules
from controller.core.jobs.sensitive import job_redactor
from controller.io.trimming import job_fields, own_secret_fields
from runtime.cache import Store
from tests.unit.io.cache_objects import (
    captf,
    job,
    own,
)

# --- What a Job keeps once cached -----------------------------------------------------------


def test_a_cached_job_keeps_what_the_rules_read_and_drops_its_pod_template() -> None:
    owner = captf(CLUSTER, "c")
    result = '{"outcome": "failed", "message": "s3cr3t and hush leaked"}'
    full = job(owner, "c-apply-1", annotations={ANN_RESULT: result, ANN_INPUTS_HASH: "h1"})
    runner = full["spec"]["template"]["spec"]["containers"][0]
    runner["env"] += [
        {"name": "CAPTF_INPUTS_SECRET", "value": "c-inputs-1"},
        {"name": "CAPTF_SECRET_VARIABLES", "value": "password"},
    ]
    runner["envFrom"] = [{"secretRef": {"name": "creds"}}]
    kept = job_fields(copy.deepcopy(full))
    assert kept["spec"]["template"]["spec"]["containers"] == [
        {
            "env": [
                {"name": "CAPTF_INPUTS_SECRET", "value": "c-inputs-1"},
                {"name": "CAPTF_SECRET_VARIABLES", "value": "password"},
            ],
            "envFrom": [{"secretRef": {"name": "creds"}}],
        }
    ]
    inputs = '{"variables": {"password": "hush"}}'
    secrets = {
        "c-inputs-1": {"data": {"inputs.json": base64.b64encode(inputs.encode()).decode()}},
        "creds": {"data": {"TOKEN": base64.b64encode(b"s3cr3t").decode()}},
    }
    message = "tofu said s3cr3t and hush"
    redacted = job_redactor(full, secrets).text(message)
    assert "s3cr3t" not in redacted
    assert job_redactor(kept, secrets).text(message) == redacted
    for read in (job_rules.op_of, job_rules.seq_of, job_rules.result, job_rules.inputs_hash_of):
        assert read(kept) == read(full)
    assert job_rules.classify(kept) == job_rules.classify(full)
    assert job_rules.finished_at(kept) == job_rules.finished_at(full)


def test_a_job_without_the_hash_annotation_keeps_the_runners_hash_variable() -> None:
    full = job(captf(CLUSTER, "c"), "c-apply-1")
    env = full["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "CAPTF_INPUTS_HASH", "value": "h2"})
    kept = job_fields(copy.deepcopy(full))
    assert job_rules.inputs_hash_of(kept) == "h2"
    assert kept["spec"]["template"]["spec"]["containers"] == [
        {"env": [{"name": "CAPTF_INPUTS_HASH", "value": "h2"}], "envFrom": []}
    ]


def test_a_cached_job_drops_what_no_rule_reads() -> None:
    owner = captf(CLUSTER, "c")
    full = job(owner, "c-apply-1", annotations={ANN_INPUTS_HASH: "h1"})
    meta = full["metadata"]
    meta["labels"] |= {
        "batch.kubernetes.io/controller-uid": "j-uid",
        "batch.kubernetes.io/job-name": "c-apply-1",
        "controller-uid": "j-uid",
        "job-name": "c-apply-1",
    }
    meta["ownerReferences"] = [
        {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": CLUSTER,
            "name": "c",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    at = "2026-11-30T12:00:00Z"
    full["status"] = {
        "startTime": at,
        "completionTime": at,
        "succeeded": 1,
        "ready": 0,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": at},
            {"type": "Complete", "status": "True", "message": "done", "lastTransitionTime": at},
        ],
    }
    env = full["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "CAPTF_INPUTS_HASH", "value": "h1"})
    kept = job_fields(copy.deepcopy(full))
    assert set(kept["metadata"]["labels"]) == {LABEL_KIND, LABEL_NAME, LABEL_UID, LABEL_OP}
    assert [ref.get("blockOwnerDeletion") for ref in kept["metadata"]["ownerReferences"]] == [None]
    assert kept["status"]["conditions"] == [
        {"type": "Complete", "status": "True", "lastTransitionTime": at}
    ]
    assert "ready" not in kept["status"]
    # The annotation records the hash, so the runner's variable is not kept beside it.
    assert "spec" not in kept
    for read in (job_rules.inputs_hash_of, job_rules.finished_at, job_rules.classify):
        assert read(kept) == read(full)
    assert owns(owner, kept)
    assert owns(owner, full)


def test_the_jobs_of_one_object_share_the_strings_they_repeat() -> None:
    """Decoded apart, as a watch decodes them: equal strings are distinct objects until
    the cache interns them (a Job's owner uid, kind and inputs hash; equal times)."""
    owner = captf(CLUSTER, "c")
    at = "2026-11-30T12:00:00Z"
    store = Store()
    for seq in (1, 2):
        one = job(owner, f"c-apply-{seq}", annotations={ANN_INPUTS_HASH: "ab" * 32})
        one["status"] = {
            "completionTime": at,
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": at}],
        }
        store.upsert(job_fields(orjson.loads(orjson.dumps(one))))
    first, second = (store.get(f"ns/c-apply-{seq}") for seq in (1, 2))
    assert first is not None
    assert second is not None
    assert first["metadata"]["labels"][LABEL_UID] is second["metadata"]["labels"][LABEL_UID]
    assert first["metadata"]["labels"][LABEL_KIND] is second["metadata"]["labels"][LABEL_KIND]
    hashes = [j["metadata"]["annotations"][ANN_INPUTS_HASH] for j in (first, second)]
    assert hashes[0] is hashes[1]
    status = first["status"]
    assert status["conditions"][0]["lastTransitionTime"] is status["completionTime"]


@pytest.mark.parametrize(
    ("name", "labels", "kept"),
    [
        ("c-inputs-0123abcd", {LABEL_NAME: "c", LABEL_KIND: CLUSTER}, {"k": "dg=="}),
        ("p1", {LABEL_PLAN_OF: "c"}, {"k": ""}),
        ("c-state", {LABEL_NAME: "c", LABEL_KIND: CLUSTER}, None),
        (state_secret_name("ns", CLUSTER, "c"), {LABEL_NAME: "c", LABEL_KIND: CLUSTER}, None),
        # Named like a state, without the kind label: a user's, kept as metadata.
        ("d-state", {LABEL_NAME: "d"}, None),
        ("c-inputs-state-3", {LABEL_BACKUP_OF: "c-inputs"}, None),
        ("c-outputs", {LABEL_OUTPUTS_OF: "c"}, {"k": "dg=="}),
    ],
)
def test_what_is_cached_of_a_secret_captf_wrote(
    name: str, labels: dict[str, str], kept: dict[str, str] | None
) -> None:
    cached = own_secret_fields(own(name, labels, {"k": "dg=="}))
    assert cached.get("data") == kept
    assert cached["metadata"]["labels"] == labels | MANAGED_BY


@pytest.mark.parametrize(
    ("size", "kept_value"),
    [(100, True), (STATE_OUTPUTS_LIMIT, True), (STATE_OUTPUTS_LIMIT + 3, False)],
)
def test_a_state_keeps_its_contract_outputs_up_to_the_limit(size: int, kept_value: bool) -> None:
    outputs = base64.b64encode(b"x" * size).decode()
    data = {"terraform.tfstate": "c3RhdGU=", STATE_OUTPUTS_KEY: outputs}
    cached = own_secret_fields(own("c-state", {LABEL_NAME: "c", LABEL_KIND: CLUSTER}, data))
    assert cached["data"] == {STATE_OUTPUTS_KEY: outputs if kept_value else ""}
    # The state-size gauge reads the decoded size of every key ("state" is 5 bytes).
    assert cached[DATA_BYTES] == 5 + size
