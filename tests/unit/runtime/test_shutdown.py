"""The stop request: set once, by a call or by SIGTERM/SIGINT, and what it calls back."""

from __future__ import annotations

import os
import signal

import anyio
import pytest

from runtime.shutdown import StopRequest, stop_on_signals


async def test_set_calls_each_registered_callback_once_and_only_inside_its_block() -> None:
    stop, called = StopRequest(), list[str]()
    with stop.calls(lambda: called.append("inside")):
        pass
    with stop.calls(lambda: called.append("a")), stop.calls(lambda: called.append("b")):
        stop.set()
        stop.set()
    assert called == ["a", "b"]
    assert stop.is_set()


async def test_a_callback_registered_after_the_request_is_called_at_once() -> None:
    stop, called = StopRequest(), list[str]()
    stop.set()
    with stop.calls(lambda: called.append("late")):
        assert called == ["late"]


async def test_it_cancels_a_scope_and_wakes_waiters() -> None:
    stop = StopRequest()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop.wait)
            with anyio.CancelScope() as scope, stop.calls(scope.cancel):
                stop.set()
                await anyio.sleep_forever()
    assert scope.cancelled_caught


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_sigterm_and_sigint_set_it_while_the_block_runs(signum: signal.Signals) -> None:
    stop = StopRequest()
    with stop_on_signals(stop):
        os.kill(os.getpid(), signum)
        with anyio.fail_after(5):
            await stop.wait()
    # Outside the block the process's previous handling is back.
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) == signal.default_int_handler
