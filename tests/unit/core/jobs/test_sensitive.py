"""Which values a Job hides: credentials, variables from Secrets, variables a module
declares sensitive; the same set for the runner and for the controller's second pass."""

from __future__ import annotations

import base64

import pytest

from controller.core.basics.redact import REDACTED
from controller.core.decide.decision import Run
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.history import History
from controller.core.jobs.sensitive import (
    job_redactor,
    secret_variable_names,
    sensitive_variables,
    values,
)
from controller.core.plan import jobspec
from controller.core.spec import inputs as inputs_mod
from controller.core.spec.inputs_secret import InputsData
from controller.core.spec.policy import read_policy

MODULE_TF = """
variable "token" {
  type      = string
  sensitive = true
}
# variable "commented" { sensitive = true }
variable "plain" {
  type = string
  validation {
    condition     = length(var.plain) > 0
    error_message = "sensitive = true is only text here"
  }
}
variable "off" { sensitive = false }
variable "inline" { sensitive = true }
"""
MODULE_JSON = '{"variable": {"j": {"sensitive": true}, "k": {"type": "string"}}}'


def secret(name: str, data: dict[str, str]) -> dict[str, object]:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"kind": "Secret", "metadata": {"name": name, "namespace": "ns"}, "data": encoded}


def test_variables_declared_sensitive_are_found_in_hcl_and_json() -> None:
    found = sensitive_variables({"main.tf": MODULE_TF, "more.tf.json": MODULE_JSON, "x.md": ""})
    assert found == {"token", "inline", "j"}


@pytest.mark.parametrize("broken", ["{", "[]", '{"variable": 3}', '{"variable": {"a": null}}'])
def test_unreadable_json_modules_declare_nothing(broken: str) -> None:
    assert sensitive_variables({"m.tf.json": broken}) == set()


def test_values_of_secret_and_sensitive_variables_and_credentials() -> None:
    variables = {"token": "tok-123456", "plain": "visible", "db": {"pw": "pw-7890"}}
    inputs = InputsData({"main.tf": MODULE_TF}, variables)
    creds = secret("creds", {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI"})
    assert values(inputs, ["db"], creds) == {"tok-123456", "pw-7890", "wJalrXUtnFEMI"}


def test_the_controller_rebuilds_the_runners_set_from_the_job() -> None:
    spec = {
        "source": {"configMapRef": {"name": "mod"}},
        "variables": {"plain": "visible"},
        "variablesFrom": [{"secretRef": {"name": "vars"}}],
        "identityRef": {"kind": "Secret", "name": "creds"},
        "jobs": {"image": "runner:1"},
    }
    obj = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformCluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
        "spec": spec,
    }
    secrets = {
        "vars": secret("vars", {"db_password": "correct-horse"}),
        "creds": secret("creds", {"TOKEN": "ghp_abcdef"}),
    }
    cm = {"mod": {"data": {"main.tf": 'variable "db_password" {}\nvariable "plain" {}'}}}
    rendered = inputs_mod.render(spec, cm, secrets)
    assert secret_variable_names(spec, secrets) == sorted(rendered.secret_names)
    job = jobspec.build_job(
        obj,
        Run(op="apply", reason="NoState", retry=1),
        inputs=rendered,
        policy=read_policy(spec),
        seq=1,
        name="c-apply-1",
    )
    stored = {"raw": {k: v.decode() for k, v in rendered.secret_data().items()}}
    inputs_secret = secret(jobspec.inputs_secret_name(obj, rendered), stored["raw"])
    carried = secrets | {inputs_secret["metadata"]["name"]: inputs_secret}  # type: ignore[index]
    rule = job_redactor(job, carried)
    text = "Error: auth correct-horse / ghp_abcdef failed for visible"
    assert rule.text(text) == f"Error: auth {REDACTED} / {REDACTED} failed for visible"
    # Without the Secrets at hand, nothing is known and nothing changes.
    assert job_redactor(job, {}).text(text) == text


def test_verdicts_built_from_a_job_are_redacted_by_the_snapshot() -> None:
    job = {
        "kind": "Job",
        "metadata": {
            "name": "c-apply-1",
            "namespace": "ns",
            "labels": {"captf.io/op": "apply"},
            "annotations": {"captf.io/result": '{"outcome":"failed","message":"bad ghp_abcdef"}'},
        },
        "spec": {
            "template": {"spec": {"containers": [{"envFrom": [{"secretRef": {"name": "creds"}}]}]}}
        },
        "status": {"conditions": [{"type": "Failed", "status": "True"}]},
    }
    obj = {"kind": "TerraformCluster", "metadata": {"name": "c", "namespace": "ns"}}
    snap = Snapshot(obj=obj, jobs=(job,), secrets={"creds": secret("creds", {"T": "ghp_abcdef"})})
    (record,) = History(snap.jobs, snap.plan_readable, snap.redactor)
    assert record.verdict.message == f"Job c-apply-1 failed: bad {REDACTED}"
    (unredacted,) = History(snap.jobs, snap.plan_readable)
    assert "ghp_abcdef" in unredacted.verdict.message
