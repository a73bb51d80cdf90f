"""What every step of DecideOp reads: the snapshot, the time, and what is derived once from them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.core.basics.names import ANN_APPROVE, ANN_INPUTS_HASH, ANN_PLAN_JOB, ANN_SERIAL, Op
from controller.core.decide.snapshot import Snapshot
from controller.core.jobs.history import Finished, History
from controller.core.jobs.job import Outcome, annotations_of, created_at, inputs_hash_of, op_of
from controller.core.spec.inputs import Inputs, InputsMissing, render
from controller.core.spec.policy import Policy, PolicyError, read_policy

Json = dict[str, Any]
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass
class Context:
    snap: Snapshot
    now: datetime
    policy: Policy
    inputs: Inputs

    @property
    def history(self) -> History:
        return self.snap.history

    @property
    def approved(self) -> str | None:
        """The Job named by the object's approve annotation."""
        return self.snap.annotations.get(ANN_APPROVE) or None

    @property
    def state_inputs_hash(self) -> str | None:
        state = self.snap.state_secret
        return annotations_of(state).get(ANN_INPUTS_HASH) if state else None

    def has_applied(self) -> bool:
        """The first successful apply happened (its Job may be pruned; the state keeps it)."""
        applied = self.history.newest(Op.APPLY, outcome=Outcome.SUCCESS)
        return bool(self.state_inputs_hash) or applied is not None

    def plan_used(self, plan: Finished) -> bool:
        """An apply carried the plan out: it names the plan, or it was created after the plan
        finished (one Job runs at a time, and in Manual mode every apply follows its plan)."""
        for job in self.snap.jobs:
            if op_of(job) != Op.APPLY:
                continue
            if annotations_of(job).get(ANN_PLAN_JOB) == plan.name:
                return True
            started = created_at(job)
            if started is not None and started >= plan.at:
                return True
        return False

    def plan_current(self, plan: Finished) -> bool:
        """The plan was made for the current inputs (a plan without a recorded hash is trusted)."""
        made_for = inputs_hash_of(plan.job)
        return made_for is None or made_for == self.inputs.hash

    def open_plan(self) -> Finished | None:
        """The newest successful plan of the current inputs that no apply has used yet."""
        plan = self.history.newest(Op.PLAN)
        if plan is None or plan.outcome != Outcome.SUCCESS:
            return None
        return plan if self.plan_current(plan) and not self.plan_used(plan) else None

    def state_serial_problem(self) -> str | None:
        state = self.snap.state_secret
        if state is None:
            return None
        raw = annotations_of(state).get(ANN_SERIAL)
        # A plain decimal integer: int() alone would also take "1_000", " 3" or "\u0663".
        if raw is None or _INTEGER.fullmatch(raw) is None:
            return f"state Secret {self.snap.name}-state has no integer {ANN_SERIAL} ({raw!r})"
        return None


def policy_and_inputs(snap: Snapshot) -> tuple[Policy | None, Inputs | None]:
    """The policy and the rendered inputs, each None when it cannot be read."""
    try:
        policy: Policy | None = read_policy(snap.spec, snap.runner)
    except PolicyError:
        policy = None
    try:
        inputs: Inputs | None = render(snap.spec, snap.configmaps, snap.secrets)
    except InputsMissing:
        inputs = None
    return policy, inputs
