"""`captf runner`: the runner image's entrypoint.

Exit status 0 means the outcome is `succeeded`; anything else exits 1, so the
Job's own status agrees with the result. The result is the container's termination
message (RunnerVar.RESULT_FILE, the Job's terminationMessagePath): the runner writes
no Job, and the controller records the result on the Job once it finished. SIGTERM
(and SIGINT, for a terminal) is forwarded once to the running tofu, whose state is
then saved and the Job reported `interrupted`."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from controller.core.basics.redact import Redactor
from controller.core.jobs.job import Outcome
from controller.core.jobs.run_report import ErrorKind, runtime_version
from controller.core.jobs.termination import redacted_changes, redacted_report
from controller.runner import cpu, redaction
from controller.runner.env import EnvError, RunnerEnv, from_environ
from controller.runner.kube import Kube, TransportKube
from controller.runner.module_image import tofu_of
from controller.runner.op_context import Tofu
from controller.runner.ops import execute
from controller.runner.result import RunnerResult
from controller.runner.steps import Recorder
from controller.runner.tofu import TofuRunner
from controller.runner.workdir import root_dir
from runtime.transport.thin import open_thin_transport

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run(args: argparse.Namespace) -> int:
    try:
        env = from_environ(os.environ)
    except EnvError as exc:
        # Without its instructions the runner cannot even name its Job.
        print(f"captf-runner: {exc}", file=sys.stderr, flush=True)
        return 1
    code = asyncio.run(_main(env))
    print(cpu.line(), flush=True)  # after the result: what this Job cost, and where
    return code


async def _main(env: RunnerEnv) -> int:
    # In a pod: in-cluster config; for the local executor: $KUBECONFIG. The thin
    # transport: a runner makes a few requests, and aiohttp's import would cost more.
    async with open_thin_transport(None) as transport:
        result = await serve(env, TransportKube(transport, env.namespace))
    return result.exit_code


async def serve(env: RunnerEnv, kube: Kube) -> RunnerResult:
    """Runs the op in a fresh work directory with signals forwarded to tofu, and
    writes the result to the termination message file."""
    try:
        redactor = await redaction.load(env, kube)
    except redaction.RedactionError as exc:
        result = RunnerResult(
            outcome=Outcome.FAILURE,
            message=str(exc),
            error_kind=ErrorKind.CREDENTIALS,
            summary="cannot read the credentials Secret to redact its values",
            job_uid=env.job_uid,
        )
        report(env.result_file, result, Redactor(frozenset()))
        return result
    work_dir = Path(tempfile.mkdtemp(prefix="captf-runner-", dir=env.work_dir))
    root = root_dir(work_dir)  # tofu runs here; a generated root's module is its sibling
    # A module image's own OpenTofu and provider mirror, where it ships them.
    binary, cli_config = tofu_of(env.module_image_dir, env.tofu, env.tofu_cli_config, work_dir)
    if env.module_image_dir is not None:
        print(f"captf-runner: module image: tofu {binary}, CLI config {cli_config}", flush=True)
    tofu = TofuRunner(binary, str(root), cli_config=cli_config, redactor=redactor)
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        loop.add_signal_handler(sig, tofu.terminate)
    try:
        version = await version_of(tofu)
        recorder = Recorder(tofu)
        result = await run_op(env, kube, recorder, root)
        result = replace(
            result, job_uid=env.job_uid, runtime_version=version, steps=tuple(recorder.steps)
        )
        report(env.result_file, result, redactor)
    finally:
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)
        shutil.rmtree(work_dir, ignore_errors=True)
    return result


async def run_op(env: RunnerEnv, kube: Kube, tofu: Tofu, work_dir: Path) -> RunnerResult:
    """The op's result; an unexpected error becomes a `failed` result, so the Job
    is always reported."""
    print(f"captf-runner: {env.op.value} {env.object_kind}/{env.object_name}", flush=True)
    try:
        return await execute(env, kube, tofu, work_dir)
    except Exception as exc:
        return RunnerResult(
            outcome=Outcome.FAILURE,
            message=f"runner error: {type(exc).__name__}: {exc}",
            error_kind=ErrorKind.INTERNAL,
            summary=f"runner error: {type(exc).__name__}",
        )


async def version_of(tofu: Tofu) -> str | None:
    """The runtime's version (`tofu version -json`); None when it says none. Not a step:
    it belongs to every run alike."""
    ex = await tofu.run("version", "-json", capture=True)
    return runtime_version(ex.stdout) if ex.code == 0 else None


def report(path: str, result: RunnerResult, redactor: Redactor) -> None:
    """Writes the result to the termination message file. The message and the summary are
    redacted whole, before they are cut to size or their values stripped, so no cut can
    leave part of a value behind."""
    redacted = replace(
        result,
        message=redactor.text(result.message),
        summary=redactor.text(result.summary),
        changes=redacted_changes(result.changes, redactor) if result.changes else None,
        policy=redacted_report(result.policy, redactor) if result.policy else None,
    )
    value = redacted.to_json()
    print(f"captf-runner: result {value}", flush=True)
    try:
        Path(path).write_text(value, encoding="utf-8")
    except OSError as exc:
        # Nothing else can carry it: the Job then finishes without a result, which the
        # controller counts as a failure of the runner.
        print(f"captf-runner: cannot write the result to {path}: {exc}", file=sys.stderr)
