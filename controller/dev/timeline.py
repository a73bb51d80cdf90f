"""A live timeline of what the controller decides and what its Jobs do, for people.

It watches the CAPTF objects and their Jobs like any other client and prints one
line per change: a decision (status.next) with its reason and, for a wait, the
time it ends and how long that is from now; a Job started; a Job finished with
its outcome, and for a failure the last lines of its message (where tofu prints the
cause), redacted as the controller redacts them. Given the controller's own
Deployment, also which replica leads, each handover, and which replicas are Ready
(controller.dev.replicas). With `capi`, also the phases of Cluster API's Clusters,
Machines and MachinePools as Cluster API moves them, and each pool's replicas
(controller.dev.phases). On a terminal, a footer counts down the waits.

With the time scaled, each line carries the wall clock and the controller's clock
side by side (`23:41:05 [ctl 02:12:30]`): waits are stated in controller time, and
how long they last in wall-clock seconds."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import anyio

from controller.core.basics.names import ANN_RETRY, CAPI_KINDS, KINDS, LABEL_UID
from controller.core.basics.timefmt import TimeFormatError, parse_time
from controller.core.jobs.job import classify, is_finished, op_of
from controller.core.jobs.sensitive import job_redactor
from controller.core.jobs.termination import needs_result
from controller.dev.phases import lines_of
from controller.dev.replicas import Replicas
from controller.io.api import CAPI_OBJECTS, JOBS, OBJECTS, SECRETS
from runtime.cache import Informer, Selection
from runtime.cache.reflector import ListWatchTransport
from runtime.clock import Clock, LoopClock
from runtime.jsonobj import Json

# A failure shows its headline and this many of its last lines: tofu ends with the cause.
CAUSE_LINES = 6


def cause_lines(message: str, keep: int = CAUSE_LINES) -> list[str]:
    """The message's first line (what failed) and its last `keep` non-empty lines (why),
    each on its own line; nothing is cut within a line."""
    lines = [line.rstrip() for line in message.splitlines() if line.strip()]
    if len(lines) <= keep + 1:
        return lines
    return [lines[0], f"... ({len(lines) - keep - 1} lines)", *lines[-keep:]]


class Timeline:
    def __init__(
        self,
        transport: ListWatchTransport,
        *,
        clock: Clock,
        scale: float = 1.0,
        out: TextIO = sys.stdout,
        deployment: tuple[str, str] | None = None,
        capi: bool = False,
    ) -> None:
        """`deployment`: (namespace, name) of the controller's own Deployment, if any;
        `capi`: Cluster API's CRDs are installed, so its objects are watched too."""
        self._clock = clock
        self._scale = scale
        self._out = out
        self._waits: dict[str, tuple[str, datetime]] = {}  # object -> (reason, until)
        real = LoopClock()
        self._objects = {kind: Informer(transport, OBJECTS[kind], clock=real) for kind in KINDS}
        self._jobs = Informer(
            transport,
            JOBS,
            clock=real,
            selection=Selection(label_selector=LABEL_UID),
        )
        for kind, informer in self._objects.items():
            informer.add_handler(self._on_object(kind))
        self._owners = (
            {kind: Informer(transport, CAPI_OBJECTS[kind], clock=real) for kind in CAPI_KINDS}
            if capi
            else {}
        )
        for kind, informer in self._owners.items():
            informer.add_handler(self._on_owner(kind))
        self._jobs.add_handler(self._on_job)
        # The Secrets a Job's messages are redacted with (the controller's second pass).
        self._secrets = Informer(transport, SECRETS, clock=real)
        self._replicas = (
            Replicas(transport, namespace=deployment[0], name=deployment[1], say=self.say)
            if deployment
            else None
        )

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            informers = [*self._objects.values(), *self._owners.values()]
            for informer in [*informers, self._jobs, self._secrets]:
                tg.start_soon(informer.run)
            if self._replicas is not None:
                tg.start_soon(self._replicas.run)
            if self._out.isatty():
                tg.start_soon(self._footer)

    def say(self, who: str, text: str) -> None:
        stamp = self._stamp()
        lead = "\r\033[K" if self._out.isatty() else ""
        first, *more = text.split("\n")
        lines = [f"{lead}{stamp}  {who:<40} {first}\n"]
        lines += [f"{' ' * len(stamp)}  {'':<40}   {line}\n" for line in more]
        self._out.write("".join(lines))
        self._out.flush()

    def _stamp(self) -> str:
        """The wall clock; with the time scaled, the controller's clock beside it."""
        wall = datetime.now(UTC).strftime("%H:%M:%S")
        if self._scale == 1.0:
            return wall
        return f"{wall} [ctl {self._clock.now():%H:%M:%S}]"

    def _in(self, until: datetime) -> str:
        seconds = (until - self._clock.now()).total_seconds() / self._scale
        return f"in {max(seconds, 0.0):.1f}s" + (" wall" if self._scale != 1.0 else "")

    def _on_object(self, kind: str) -> Any:
        def handler(old: Json | None, new: Json | None) -> None:
            who = f"{kind}/{(new or old or {}).get('metadata', {}).get('name')}"
            if new is None:
                self._waits.pop(who, None)
                self.say(who, "deleted")
                return
            before = ((old or {}).get("status") or {}).get("next")
            after = (new.get("status") or {}).get("next")
            if after and after != before:
                self._decision(who, after)

        return handler

    def _on_owner(self, kind: str) -> Any:
        def handler(old: Json | None, new: Json | None) -> None:
            who = f"{kind}/{(new or old or {}).get('metadata', {}).get('name')}"
            for line in lines_of(old, new):
                self.say(who, line)

        return handler

    def _decision(self, who: str, nxt: Json) -> None:
        reason, op = nxt.get("reason", ""), nxt.get("op")
        try:
            until = parse_time(nxt["at"]) if nxt.get("at") else None
        except TimeFormatError:
            until = None
        what = f"{op} " if op else ""
        if reason == "Idle":
            self._waits.pop(who, None)
            when = f"; next scheduled check at {until:%H:%M:%S}" if until else ""
            self.say(who, f"idle: up to date{when}")
        elif until is not None and until > self._clock.now():
            self._waits[who] = (reason, until)
            self.say(who, f"waits: {what}{reason} until {until:%H:%M:%S} ({self._in(until)})")
        else:
            self._waits.pop(who, None)
            self.say(who, f"decides: {what}{reason}")

    def _on_job(self, old: Json | None, new: Json | None) -> None:
        if new is None:
            return
        name = new["metadata"]["name"]
        retry = (new["metadata"].get("annotations") or {}).get(ANN_RETRY, "?")
        if old is None and not is_finished(new):
            self.say(f"Job/{name}", f"started: {op_of(new)}, attempt {retry}")
        elif _reported(new) and (old is None or not _reported(old)):
            verdict = classify(new)
            secrets = {s["metadata"]["name"]: s for s in self._secrets.store}
            message = job_redactor(new, secrets).text(verdict.message)
            self.say(f"Job/{name}", f"{verdict.outcome}: " + "\n".join(cause_lines(message)))

    async def _footer(self) -> None:
        while True:
            now = self._clock.now()
            parts = [
                f"{who.split('/')[-1]} {reason} {self._in(until)}"
                for who, (reason, until) in sorted(self._waits.items())
                if until > now
            ]
            self._out.write("\r\033[K" + (" | ".join(parts) if parts else ""))
            self._out.flush()
            await anyio.sleep(0.5)


def _reported(job: Json) -> bool:
    """Whether a Job's outcome can be told: it finished and the controller has recorded
    its result from the runner's termination message (or accounted it without one).
    Before that, a finished Job reads as `completed with no result`."""
    return is_finished(job) and not needs_result(job)
