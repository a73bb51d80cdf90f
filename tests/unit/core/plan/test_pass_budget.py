"""One pass over one object (the core's plan, what the controller runs on its event loop)
stays cheap on hostile inputs of every size the project allows: a module up to the 1 MiB a
ConfigMap and the inputs Secret hold (SECRET_SIZE_LIMIT), in one file or in as many files as
fit, the state's contract outputs up to STATE_OUTPUTS_LIMIT, each Job's result up to the
kubelet's 4096 bytes (termination.MESSAGE_LIMIT), several Jobs carrying the same inputs.

No wall-clock assertion: CPU time of this process only, and two checks that a linear pass
clears by far and a quadratic one (the regex that rescanned blank lines: 8 s for 40,000
lines) fails by far. First the growth from n to 4n at small sizes, fast even when it fails:
linear work grows 4 times (less, with the pass's fixed cost), quadratic 16. Then the pass at
the limit against a peer measured in the same run: an ordinary module of the same size
(resource blocks), whose pass is what any 1 MiB module costs. A hostile one may cost a few
times that (measured here: the ordinary pass 0.24 s, the worst hostile one 0.75 s, 3.1
times); a quadratic scan costs tens of times. A ratio, not seconds: on a shared machine
both passes slow down alike, so the bound holds on the code, not on the machine's load."""

from __future__ import annotations

import copy
import gc
import re
import time
from collections.abc import Callable

import orjson
import pytest

from controller.core.basics import redact
from controller.core.basics.names import (
    ANN_RESULT,
    SECRET_SIZE_LIMIT,
    STATE_OUTPUTS_KEY,
    STATE_OUTPUTS_LIMIT,
)
from controller.core.decide import snapshot
from controller.core.jobs.termination import MESSAGE_LIMIT
from controller.core.plan.planner import plan_pass
from tests import builders as b

Module = dict[str, str]
# Room left for the role module, the variables and the contract inputs in the Secret.
ROOM = 16 * 1024
LIMIT = SECRET_SIZE_LIMIT - ROOM
GROWTH = 8.0  # between linear (4) and quadratic (16)
SLACK = 0.05  # seconds: the pass's own cost and the noise of a shared machine
RATIO = 8.0  # a pass at the limits against the ordinary module's pass of the same size
JOBS = 4  # finished Jobs carrying the module: each one's redactor reads it


def _ordinary(size: int) -> Module:
    """The peer: a module of `size` bytes as people write them, one resource block after
    another."""
    blocks, length, i = [], 0, 0
    while length < size:
        block = f'resource "terraform_data" "r{i}" {{\n  input = "value {i}"\n}}\n'
        blocks.append(block)
        length, i = length + len(block), i + 1
    return {"main.tf": "".join(blocks)}


@pytest.fixture(scope="module")
def budget() -> float:
    """CPU seconds a hostile pass at the limits may take: RATIO times the peer's pass."""
    return RATIO * _cpu(_snapshot(_ordinary(LIMIT)))


def _lines(unit: str) -> Callable[[int], Module]:
    return lambda size: {"main.tf": unit * (size // len(unit))}


# Each shape aims at one way a scan can go quadratic or worse.
SHAPES: dict[str, Callable[[int], Module]] = {
    "blank lines": _lines("\n"),
    "indented blank lines": _lines(" \t\n"),
    "comment lines": _lines("#\n"),
    "slash comments": _lines("//\n"),
    "unterminated block comments": _lines("/*"),
    "unclosed variable blocks": _lines('variable "a" {\n'),
    "unclosed sensitive variables": _lines('variable "a" {\n  sensitive = true\n'),
    "open braces": _lines("{"),
    "blank lines in a variable": lambda size: {"main.tf": 'variable "a" {' + "\n" * size},
    "open quotes": _lines('"\\'),
    "contract look-alikes": _lines('variable "captf_contract"\n'),
    "many files": lambda size: {f"f{i:06d}.tf": "\n" for i in range(size // 16)},
    "nested JSON": lambda size: {"main.tf.json": "[" * size},
    "many JSON variables": lambda size: {
        "main.tf.json": orjson.dumps(
            {"variable": {f"v{i}": {"sensitive": True} for i in range(size // 30)}}
        ).decode()
    },
}


def _hostile_result(seq: int) -> str:
    """A failed result of MESSAGE_LIMIT bytes whose text is all open quotes and runs."""
    head = {"outcome": "failed", "error": {"kind": "apply", "summary": '"\\' * 70}}
    message = ""
    body = orjson.dumps(head | {"message": message}).decode()
    room = MESSAGE_LIMIT - len(body.encode()) - 8
    message = ('"\\' + "a" * 30 + " ") * (room // 40) + str(seq)
    return orjson.dumps(head | {"message": message}).decode()


def _snapshot(
    module: Module, outputs: str = "{}", variables: dict[str, object] | None = None
) -> snapshot.Snapshot:
    """A role cluster whose module is `module` and variables `variables`, with JOBS failed
    applies that carried them and a state whose contract outputs are `outputs`."""
    module = b.ROLE_MODULE | module
    obj = b.captf(spec={"variables": {"size": 4, **(variables or {})}})
    others = b.base_objects(module=module)
    first = plan_pass(snapshot.build(obj, others), b.NOW).launch
    assert first is not None
    assert first.inputs_secret is not None
    jobs = []
    for seq in range(1, JOBS + 1):
        job = copy.deepcopy(first.job)
        done = b.job("apply", seq, "failed", finished=b.ago(minutes=40 - seq))
        job["metadata"]["name"] = done["metadata"]["name"]
        job["metadata"]["annotations"] = {ANN_RESULT: _hostile_result(seq)}
        job["status"] = done["status"]
        jobs.append(job)
    state = b.state(serial=1, inputs="0" * 64)
    state["data"][STATE_OUTPUTS_KEY] = b.secret("x", {"o": outputs})["data"]["o"]
    others = [o for o in others if o["metadata"]["name"] != "c1-state"] + [state]
    return snapshot.build(obj, [*others, first.inputs_secret, *jobs])


def _cpu(snap: snapshot.Snapshot) -> float:
    """The least CPU time of three passes (the least is the one least disturbed), each
    with nothing cached from the one before. The collector is off while a pass is timed,
    as timeit has it: a full collection scans whatever earlier tests left on the heap (in
    the whole unit suite it made the "many files" pass 2.7 s, 0.5 s alone), not the pass's."""
    spent = []
    for _ in range(3):
        fresh = snapshot.Snapshot(**{f: getattr(snap, f) for f in snap.__dataclass_fields__})
        redact._compiled.cache_clear()  # as a fresh process meets it,
        re.purge()  # and `re`'s own cache of compiled patterns
        gc.collect()
        gc.disable()
        try:
            started = time.process_time()
            plan_pass(fresh, b.NOW)
            spent.append(time.process_time() - started)
        finally:
            gc.enable()
    return min(spent)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_pass_grows_linearly_with_a_hostile_module(shape: str) -> None:
    small = _cpu(_snapshot(SHAPES[shape](8 * 1024)))
    large = _cpu(_snapshot(SHAPES[shape](32 * 1024)))
    assert large <= GROWTH * small + SLACK, (shape, small, large)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_pass_at_the_module_size_limit_is_within_budget(shape: str, budget: float) -> None:
    snap = _snapshot(SHAPES[shape](LIMIT))
    assert _cpu(snap) <= budget, shape


OUTPUTS: dict[str, str] = {
    "nested arrays": "[" * STATE_OUTPUTS_LIMIT,
    "many keys": orjson.dumps({f"k{i}": i for i in range(STATE_OUTPUTS_LIMIT // 14)}).decode(),
    "many provider ids": orjson.dumps(
        {"provider_ids": [f"p://{i % 7}" for i in range(STATE_OUTPUTS_LIMIT // 10)]}
    ).decode(),
    "long strings": orjson.dumps({"endpoint": '"\\' * (STATE_OUTPUTS_LIMIT // 6)}).decode(),
}


@pytest.mark.parametrize("shape", OUTPUTS)
def test_a_pass_with_contract_outputs_at_their_limit_is_within_budget(
    shape: str, budget: float
) -> None:
    outputs = OUTPUTS[shape]
    assert len(outputs.encode()) <= STATE_OUTPUTS_LIMIT
    assert _cpu(_snapshot({}, outputs)) <= budget, shape


def test_a_pass_whose_sensitive_variable_fills_the_inputs_is_within_budget(budget: float) -> None:
    # Each of its values, and each of their encodings, is a pattern of the Jobs' redactor.
    tokens = [f"t{i:09d}" for i in range(LIMIT // 14)]
    module = {"secret.tf": 'variable "tokens" {\n  sensitive = true\n}\n'}
    assert _cpu(_snapshot(module, variables={"tokens": tokens})) <= budget
