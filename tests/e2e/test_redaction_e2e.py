"""A planted credential does not leak: a module prints the values of its credentials
Secret, of a variable from a `variablesFrom` Secret and of a variable it declares
sensitive, then fails; on the real API server, with real OpenTofu, none of them (nor
their base64) reaches a Job annotation, the runner's termination message, an Event, the
object's status (status.lastRun's summary among it), the runner's log or the
controller's log."""

from __future__ import annotations

import base64
import logging

import pytest

from runtime.jsonobj import Json
from tests.e2e.system import System, result_of
from tests.kube.harness import condition, event_for

pytestmark = [pytest.mark.e2e, pytest.mark.kube]

CREDENTIAL = "AKIAplanted-credential-7f3a9c"
PASSWORD = "db-password-from-a-secret-51e2"
TOKEN = "declared-sensitive-token-08d4"
PLANTED = (CREDENTIAL, PASSWORD, TOKEN)

LEAKY_MODULE = """\
variable "db_password" {
  type = string
}
variable "api_token" {
  type      = string
  sensitive = true
}
resource "terraform_data" "leak" {
  provisioner "local-exec" {
    command = <<-SH
      echo "connecting with $AWS_SECRET_ACCESS_KEY" >&2
      echo "as $(printf %s "$AWS_SECRET_ACCESS_KEY" | base64)" >&2
      echo "password ${nonsensitive(var.db_password)}" >&2
      echo "token ${nonsensitive(var.api_token)}" >&2
      exit 1
    SH
  }
}
"""


def leaks(text: str) -> list[str]:
    """The planted values, or their base64, found in `text`."""
    found = []
    for value in PLANTED:
        for form in (value, base64.b64encode(value.encode()).decode()):
            if form in text:
                found.append(form)
    return found


async def test_a_printed_credential_is_redacted_everywhere(
    system: System, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    kube = system.kube
    secrets = f"/api/v1/namespaces/{kube.ns}/secrets"
    # Created before create_cluster, which then keeps this "creds" Secret.
    await kube.call(
        "POST",
        secrets,
        {"metadata": {"name": "creds"}, "stringData": {"AWS_SECRET_ACCESS_KEY": CREDENTIAL}},
    )
    await kube.call(
        "POST", secrets, {"metadata": {"name": "db"}, "stringData": {"db_password": PASSWORD}}
    )
    await system.create_cluster(
        "leaky",
        LEAKY_MODULE,
        {"api_token": TOKEN},
        variablesFrom=[{"secretRef": {"name": "db"}}],
    )
    job = await system.finished_job("leaky", "apply", 1)
    await event_for(kube, job["metadata"]["name"], "JobFailed")

    async def failed_condition() -> Json | None:
        cond = condition(await kube.get("terraformclusters", "leaky"), "ApplyJobSucceeded")
        return cond if cond and cond["status"] == "False" else None

    applied = await system.until(failed_condition, "ApplyJobSucceeded=False")

    events = await kube.call("GET", f"/api/v1/namespaces/{kube.ns}/events")
    pods = await kube.call("GET", f"/api/v1/namespaces/{kube.ns}/pods")
    terminated = [
        ended.get("message", "")
        for pod in pods["items"]
        for container in (pod.get("status") or {}).get("containerStatuses") or []
        if (ended := (container.get("state") or {}).get("terminated"))
    ]
    assert any(terminated), pods
    last_run = (await kube.get("terraformclusters", "leaky"))["status"]["lastRun"]
    places = {
        "termination messages": str(terminated),
        "status.lastRun": str(last_run),
        "Job annotations": str(
            [v["metadata"].get("annotations") for v in system.jobs.of(job["metadata"]["name"])]
        ),
        "Events": str([(e.get("reason"), e.get("message")) for e in events["items"]]),
        "status": str([v.get("status") for v in system.clusters.of("leaky")]),
        "runner log": system.log(job),
        "controller log": "\n".join(r.getMessage() for r in caplog.records),
    }
    assert {where: leaks(text) for where, text in places.items() if leaks(text)} == {}
    assert last_run["job"] == job["metadata"]["name"]
    assert (last_run["errorKind"], last_run["summary"]) == ("apply", "local-exec provisioner error")
    # The module did print them all: the runner replaced each.
    message = result_of(job)["message"]
    assert message.startswith("tofu apply failed"), message
    assert message.count("(redacted)") >= 3, message
    assert "(redacted)" in applied["message"]
    assert "(redacted)" in places["runner log"]
