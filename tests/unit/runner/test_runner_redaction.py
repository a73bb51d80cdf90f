"""The runner removes its Job's secret values from everything it writes: tofu's output
in the pod log, and the result annotation, for a module that prints them and fails."""

from __future__ import annotations

import base64
import stat
import sys
from pathlib import Path

import orjson
import pytest

from controller.core.basics.redact import REDACTED
from controller.core.jobs.job import Outcome
from controller.runner.env import from_environ
from controller.runner.main import serve
from runtime.errors import ApiError
from tests.runner_fakes import FakeKube, secret

HASH = "cd" * 32
CREDENTIAL = "AKIA-planted-credential-4242"
FROM_SECRET = "db-password-from-a-secret"
DECLARED = "declared-sensitive-value"
MODULE = b'variable "token" {\n  sensitive = true\n}\nvariable "db" {}\nvariable "plain" {}\n'
VARIABLES = orjson.dumps({"token": DECLARED, "db": FROM_SECRET, "plain": "shown-in-clear"})

# A tofu whose init prints every secret, plain and base64, on both streams, and fails.
SCRIPT = f"""\
import base64, sys
if sys.argv[1:2] == ["version"]:
    print('{{"terraform_version": "1.9.0"}}')
    sys.exit(0)
values = {[CREDENTIAL, FROM_SECRET, DECLARED]!r}
for v in values:
    print("stdout " + v + " " + base64.b64encode(v.encode()).decode(), flush=True)
    sys.stderr.write("Error: rejected " + v + " for shown-in-clear\\n")
sys.exit(1)
"""


def fake_tofu(tmp_path: Path) -> str:
    path = tmp_path / "tofu"
    path.write_text(f"#!{sys.executable}\n{SCRIPT}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def environ(tmp_path: Path) -> dict[str, str]:
    return {
        "CAPTF_OP": "apply",
        "CAPTF_NAMESPACE": "ns",
        "CAPTF_JOB_NAME": "job",
        "CAPTF_OBJECT_NAME": "c",
        "CAPTF_OBJECT_KIND": "TerraformCluster",
        "CAPTF_INPUTS_SECRET": "c-inputs-cdcdcdcd",
        "CAPTF_INPUTS_HASH": HASH,
        "CAPTF_STATE_SECRET": "c-state",
        "CAPTF_TOFU": fake_tofu(tmp_path),
        "CAPTF_WORK_DIR": str(tmp_path),
        "CAPTF_CREDENTIALS_SECRET": "creds",
        "CAPTF_SECRET_VARIABLES": "db",
        "CAPTF_RESULT_FILE": str(tmp_path / "termination-log"),
    }


@pytest.fixture
def kube() -> FakeKube:
    k = FakeKube()
    inputs = {"module.main.tf": MODULE, "variables.json": VARIABLES}
    k.put(secret("c-inputs-cdcdcdcd", inputs, {"captf.io/inputs-hash": HASH}))
    k.put(secret("creds", {"AWS_SECRET_ACCESS_KEY": CREDENTIAL.encode()}))
    return k


async def test_a_failing_module_printing_secrets_leaks_none(
    kube: FakeKube, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    result = await serve(from_environ(environ(tmp_path)), kube)
    assert result.outcome is Outcome.FAILURE
    annotation = (tmp_path / "termination-log").read_text()
    log = capfd.readouterr().out
    body = orjson.loads(annotation)
    message = body["message"]
    assert "tofu init failed" in message
    assert "shown-in-clear" in message  # not every variable: only the secret ones
    assert message.count(REDACTED) == 3
    for value in (CREDENTIAL, FROM_SECRET, DECLARED):
        encoded = base64.b64encode(value.encode()).decode()
        for written in (annotation, log):
            assert value not in written
            assert encoded not in written
    # The summary is tofu's first headline, its value redacted before anything is cut.
    assert body["error"] == {"kind": "init", "summary": f"rejected {REDACTED} for shown-in-clear"}
    assert body["runtimeVersion"] == "1.9.0"
    assert [step["name"] for step in body["steps"]] == ["init"]
    # Three values, plain and base64 on stdout and plain on stderr, then the result line
    # (its message and its summary).
    assert log.count(REDACTED) == 9 + 3 + 1


async def test_an_unreadable_credentials_secret_runs_nothing(
    kube: FakeKube, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    class Forbidden(FakeKube):
        async def get_secret(self, name: str) -> dict[str, object] | None:
            if name == "creds":
                raise ApiError(403, "Forbidden", "secrets is forbidden")
            return await super().get_secret(name)

    denied = Forbidden()
    denied.secrets = kube.secrets
    result = await serve(from_environ(environ(tmp_path)), denied)
    assert result.outcome is Outcome.FAILURE
    assert "cannot read credentials Secret creds" in result.message
    assert "stdout" not in capfd.readouterr().out  # tofu never ran
