"""The runner's Redactor: the secret values of its Job, read before anything runs.

Everything the runner writes (tofu's output in the pod log, the result annotation)
passes through it. If the credentials Secret cannot be read, the runner cannot know
what to hide, so it runs nothing and says so (`RedactionError`)."""

from __future__ import annotations

from controller.core.basics.redact import Redactor, redactor
from controller.core.jobs import sensitive
from controller.runner.env import RunnerEnv
from controller.runner.kube import Kube
from runtime.errors import ApiError


class RedactionError(RuntimeError):
    """A Secret whose values must be hidden could not be read."""


async def load(env: RunnerEnv, kube: Kube) -> Redactor:
    """The Redactor of the Job's credentials Secret, its variables from Secrets and the
    variables its module declares sensitive. A missing inputs Secret adds nothing: the
    op itself reports it, before running anything."""
    credentials = None
    if env.credentials_secret:
        try:
            credentials = await kube.get_secret(env.credentials_secret)
        except ApiError as exc:
            raise RedactionError(
                f"cannot read credentials Secret {env.credentials_secret} to redact its "
                f"values ({exc.status}); nothing was run"
            ) from None
    inputs = None
    if env.inputs_secret:
        try:
            inputs = await kube.get_secret(env.inputs_secret)
        except ApiError:
            inputs = None  # reported by the op, which reads it again
    found = sensitive.inputs_values(inputs, env.secret_variables)
    return redactor(found | sensitive.values(None, (), credentials))
