"""The runner's result: its container's termination message, which the controller
records on the Job as the `captf.io/result` annotation."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from controller.core.jobs.job import Outcome
from controller.core.jobs.termination import MESSAGE_LIMIT as RESULT_LIMIT

# The kubelet keeps RESULT_LIMIT bytes of a termination message, and the whole result
# must fit; an operator reads the message in `kubectl describe`, so the tail of tofu's
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
        """The result as written: only the keys that apply to this op, within
        RESULT_LIMIT bytes. Only the message gives way (its last lines are kept), so
        the JSON is always whole; a result too large even without its message is
        written as a failure saying so, with its state serial."""
        budget = MESSAGE_LIMIT
        while True:
            message = bounded(self.message, budget) if budget else ""
            text = self._body(message)
            excess = len(text.encode()) - RESULT_LIMIT
            if excess <= 0:
                return text
            if not message:
                break
            # Every byte dropped from the message drops at least one from the JSON.
            budget = max(0, len(message.encode()) - excess)
        too_large = f"the runner's result is larger than {RESULT_LIMIT} bytes"
        return RunnerResult(
            outcome=Outcome.FAILURE, message=too_large, state_serial=self.state_serial
        )._body(too_large)

    def _body(self, message: str) -> str:
        body: dict[str, object] = {"outcome": self.outcome.value, "message": message}
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
