"""The runner's result: the `captf.io/result` annotation it leaves on its own Job."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from controller.core.jobs.job import Outcome

# A Job's annotations share the object's 256 KiB budget with everything else;
# an operator reads the message in `kubectl describe`, so the tail of tofu's
# error is enough.
MESSAGE_LIMIT = 2048
# The error kinds a result may carry beside its outcome.
OUTPUTS_MISSING = "outputs-missing"


@dataclass(frozen=True, kw_only=True)
class RunnerResult:
    outcome: Outcome
    message: str = ""
    state_serial: int | None = None
    plan_secret: str | None = None
    drift: bool | None = None
    outputs: tuple[str, ...] | None = None  # names written to the outputs Secret, never values
    # The contract outputs a failed plan found the module lacks: the error kind
    # `outputs-missing`, which the controller shows as OutputsValid=False/OutputsMissing.
    missing_outputs: tuple[str, ...] | None = None
    # The contract reading of the state left (apply, refresh): pending outputs, health.
    contract: dict[str, object] | None = None

    def to_json(self) -> str:
        """The annotation value: only the keys that apply to this op."""
        body: dict[str, object] = {"outcome": self.outcome.value, "message": bounded(self.message)}
        if self.state_serial is not None:
            body["stateSerial"] = self.state_serial
        if self.plan_secret is not None:
            body["planSecret"] = self.plan_secret
        if self.drift is not None:
            body["drift"] = self.drift
        if self.outputs is not None:
            body["outputs"] = list(self.outputs)
        if self.contract is not None:
            body["contract"] = self.contract
        if self.missing_outputs is not None:
            body["error"] = {"kind": OUTPUTS_MISSING, "outputs": list(self.missing_outputs)}
        return orjson.dumps(body).decode()

    @property
    def exit_code(self) -> int:
        return 0 if self.outcome is Outcome.SUCCESS else 1


def bounded(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """The last lines of `text` that fit in `limit` UTF-8 bytes, blank lines dropped.

    The end of tofu's stderr holds the error that stopped it; earlier lines
    are warnings and progress."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        cost = len(line.encode()) + (1 if kept else 0)
        if size + cost > limit:
            if not kept:
                # One line longer than the limit: keep its end, on a character boundary.
                kept.append(line.encode()[-limit:].decode("utf-8", "ignore"))
            break
        kept.append(line)
        size += cost
    return "\n".join(reversed(kept))
