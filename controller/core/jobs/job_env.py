"""What a Job told its runner, as the controller reads it back: the one reader of a Job's
runner environment.

Four facts are read from it: the inputs hash (only for Jobs made before the annotation
recorded it), the inputs Secret and the secret variables (what the Job's messages are
redacted with), and the Secrets the runner takes its environment from (the credentials).
The Job cache keeps exactly the variables in `RUNNER_VARS_READ` (controller/io/trimming.py), so a
variable read here must be listed there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.basics.runner_vars import RunnerVar
from runtime.jsonobj import Json

# The variables the controller reads back from its Jobs.
RUNNER_VARS_READ = frozenset(
    {RunnerVar.INPUTS_HASH, RunnerVar.INPUTS_SECRET, RunnerVar.SECRET_VARIABLES}
)


@dataclass(frozen=True, slots=True)
class JobEnv:
    # name -> value, over the pod's containers in order; a later entry of one name wins,
    # as the kubelet resolves it. (The controller writes each name once, in one container.)
    values: Mapping[str, str]
    # The Secrets named by the containers' envFrom, in order: the credentials.
    from_secrets: tuple[str, ...]

    def get(self, var: RunnerVar) -> str:
        """The variable's value; "" when unset."""
        return self.values.get(var, "")

    @property
    def inputs_secret(self) -> str:
        return self.get(RunnerVar.INPUTS_SECRET)

    @property
    def secret_variables(self) -> list[str]:
        """The names of the variables that came from Secrets."""
        return [name for name in self.get(RunnerVar.SECRET_VARIABLES).split(",") if name]

    @property
    def carried_secrets(self) -> list[str]:
        """The Secrets whose values the Job carried: its inputs Secret, then its envFrom
        Secrets."""
        inputs = self.inputs_secret
        return [inputs, *self.from_secrets] if inputs else list(self.from_secrets)


def containers(job: Json) -> list[Json]:
    """The containers of a Job's pod template."""
    pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    found: list[Json] = pod.get("containers") or []
    return found


def job_env(job: Json) -> JobEnv:
    """The literal env (entries with a value; a valueFrom is not the controller's) and the
    envFrom Secrets of a Job's containers."""
    values: dict[str, str] = {}
    from_secrets: list[str] = []
    for container in containers(job):
        for item in container.get("env") or []:
            if "value" in item:
                values[str(item.get("name"))] = str(item["value"])
        for source in container.get("envFrom") or []:
            name = (source.get("secretRef") or {}).get("name")
            if name:
                from_secrets.append(str(name))
    return JobEnv(values=values, from_secrets=tuple(from_secrets))
