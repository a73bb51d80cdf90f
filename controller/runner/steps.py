"""The steps of a run: every tofu command the op ran, with its exit code and seconds.

`Recorder` stands between the op and tofu (it is a `Tofu` itself), so every command
ops.py runs is recorded without the op knowing; the result carries the steps
(controller/runner/result.py). A step's name is tofu's subcommand, except that
`apply -refresh-only` is `refresh`."""

from __future__ import annotations

import time
from collections.abc import Callable

from controller.runner.op_context import Tofu
from controller.runner.result import Step
from controller.runner.tofu import Exit


def step_name(args: tuple[str, ...]) -> str:
    command = args[0] if args else "tofu"
    return "refresh" if command == "apply" and "-refresh-only" in args else command


class Recorder:
    """A Tofu that records each command it runs, in order."""

    def __init__(self, tofu: Tofu, clock: Callable[[], float] = time.monotonic) -> None:
        self._tofu = tofu
        self._clock = clock
        self.steps: list[Step] = []

    @property
    def terminated(self) -> bool:
        return self._tofu.terminated

    async def run(self, *args: str, capture: bool = False) -> Exit:
        started = self._clock()
        ex = await self._tofu.run(*args, capture=capture)
        seconds = round(max(0.0, self._clock() - started), 2)
        self.steps.append(Step(step_name(args), ex.code, seconds))
        return ex
