"""The whole system in the test's event loop: the controller on a scaled clock, a process
node running the runner pods with real OpenTofu, the real Job controller (the `cluster`
fixture runs kube-controller-manager), and a record of every version of the namespace's
CAPTF clusters and Jobs as the watch delivered them."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import orjson
from prometheus_client import CollectorRegistry

from controller.core.basics.names import ANN_ACCOUNTED, ANN_RESULT, GROUP, VERSION
from controller.core.basics.runner_vars import RunnerVar
from controller.core.basics.timefmt import parse_time
from controller.dev.node import ProcessNode, default_images
from controller.io.jobtimes import ToClock, on_clock
from controller.io.main import serve
from controller.runner.binaries import runner_environ
from runtime.cache import Informer, Resource, Selection
from runtime.clock import LoopClock
from runtime.envtest import ApiServer
from runtime.jsonobj import Json
from runtime.transport import Transport, open_transport
from tests.kube.harness import Kube, controller_args, eventually, install_runner_role

T = TypeVar("T")

# One controller minute lasts one real second.
SCALE = 60.0
# Real seconds to wait for anything that runs OpenTofu (a few seconds each on 2 cores).
WAIT = 90.0
RUNNER_ACCOUNT = "captf-runner"
CLUSTERS = Resource(GROUP, VERSION, "terraformclusters")
JOBS = Resource("batch", "v1", "jobs")


class Seen:
    """Every version of a resource's objects that the watch delivered, by name, oldest
    first: a status that passed between two polls, or a Job pruned since, stays visible.

    With `to_clock`, Job times (the Job controller's, on the wall clock) are recorded on
    the controller's scaled clock, as the controller reads them."""

    def __init__(self, to_clock: ToClock | None = None) -> None:
        self.versions: defaultdict[str, list[Json]] = defaultdict(list)
        self._to_clock = to_clock

    def record(self, old: Json | None, new: Json | None) -> None:
        if new is not None:
            seen = new if self._to_clock is None else on_clock(new, self._to_clock)
            self.versions[new["metadata"]["name"]].append(seen)

    def of(self, name: str) -> list[Json]:
        return list(self.versions.get(name, ()))

    def latest(self) -> list[Json]:
        return [versions[-1] for versions in self.versions.values()]


@dataclass
class System:
    kube: Kube
    clock: LoopClock
    infra: Path
    logs: Path
    # The admin's transport, and the process node's name (to drain it).
    transport: Transport
    node: str
    clusters: Seen = field(default_factory=Seen)
    jobs: Seen = field(default_factory=Seen)
    # Raises the error of the background run (controller, node, watches) if it ended.
    check: Callable[[], None] = lambda: None
    # The controller's metrics.
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    async def until(
        self, probe: Callable[[], Awaitable[T | None]], what: str, within: float = WAIT
    ) -> T:
        """`eventually`, failing at once with the cause when the system itself stopped."""

        async def checked() -> T | None:
            self.check()
            return await probe()

        return await eventually(checked, within=within, what=what)

    async def create_cluster(
        self, name: str, module: str, variables: Json, *, jobs: Json | None = None, **spec: Any
    ) -> Json:
        """The module `main.tf`, the credentials Secret (once) and a TerraformCluster; `jobs`
        is added to the runner image, `spec` to the rest."""
        jobs = {"serviceAccountName": RUNNER_ACCOUNT} | (jobs or {})
        return await self.kube.setup_cluster(
            name, files={"main.tf": module}, jobs=jobs, variables=variables, **spec
        )

    async def finished_job(self, name: str, op: str, seq: int, within: float = WAIT) -> Json:
        """The object's Job of that op and attempt sequence, once it has finished and the
        controller has taken its result from the pod onto it (as the watch saw it: pruning
        may have removed it from the API since). A Job whose pod left no result is
        returned once it is accounted: it will never carry one."""

        async def probe() -> Json | None:
            for job in self.jobs.latest():
                if _is(job, name, op, seq) and finished_at(job) is not None and _settled(job):
                    return job
            return None

        return await self.until(probe, f"{op} Job #{seq} of {name} finished", within)

    def log(self, job: Json) -> str:
        """The runner's output (the logs of the Job's pods), for assertion messages."""
        directory = self.logs / self.kube.ns
        paths = sorted(directory.glob(f"{job['metadata']['name']}-*.log"))
        return "".join(p.read_text() for p in paths) or f"(no pod log in {directory})"


def _settled(job: Json) -> bool:
    notes = job["metadata"].get("annotations") or {}
    return ANN_RESULT in notes or notes.get(ANN_ACCOUNTED) == "true"


def _is(job: Json, name: str, op: str, seq: int) -> bool:
    meta = job["metadata"]
    labels = meta.get("labels") or {}
    notes = meta.get("annotations") or {}
    return (labels.get("captf.io/name"), labels.get("captf.io/op"), notes.get("captf.io/seq")) == (
        name,
        op,
        str(seq),
    )


def terminal(job: Json) -> Json | None:
    """The Job's Complete or Failed condition with status True."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            found: Json = cond
            return found
    return None


def ended(job: Json) -> str:
    """ "Complete", "Failed", or "" while the Job runs."""
    cond = terminal(job)
    return str(cond["type"]) if cond else ""


def finished_at(job: Json) -> datetime | None:
    """Where the contract says a Job finished: completionTime, else the terminal condition's
    lastTransitionTime."""
    cond = terminal(job)
    if cond is None:
        return None
    return parse_time((job.get("status") or {}).get("completionTime") or cond["lastTransitionTime"])


def result_of(job: Json) -> Json:
    raw = (job["metadata"].get("annotations") or {}).get(ANN_RESULT)
    parsed: Json = orjson.loads(raw) if raw else {}
    return parsed


@contextlib.asynccontextmanager
async def running_system(
    server: ApiServer,
    namespace: str,
    tmp_path: Path,
    tofu: Path,
    crane: Path | None = None,
    copier: Path | None = None,
    images_dir: Path | None = None,
    **controller: Any,
) -> AsyncIterator[System]:
    """The controller and a process node (pods of `namespace` only) until the block ends;
    the runner pods run as the namespace's `captf-runner` ServiceAccount, which the
    controller provides (bound to manifests/runner-rbac.yaml's ClusterRole): nothing is
    applied in the namespace by hand. With `crane`, the node pulls image volumes with it;
    with `copier`, the captf image carries it (a module image Job's copy shape);
    `images_dir` is the node's image cache (default: the test's own, empty);
    `controller` overrides the controller's settings."""
    clock = LoopClock(SCALE)
    infra = tmp_path / "infra"
    infra.mkdir()
    node = f"node-{namespace}"[:63]
    pods_dir = Path(tempfile.mkdtemp(prefix="captf-pods-"))
    install_runner_role(server)
    async with (
        open_transport(str(server.kubeconfig)) as transport,
        contextlib.AsyncExitStack() as stack,
    ):
        kube = Kube(server, namespace)
        system = System(kube, clock, infra, tmp_path / "logs", transport, node)
        system.jobs = Seen(clock.from_wall)
        for resource, seen in ((CLUSTERS, system.clusters), (JOBS, system.jobs)):
            selection = Selection(namespace=namespace)
            informer = Informer(transport, resource, clock=LoopClock(), selection=selection)
            informer.add_handler(seen.record)
            await stack.enter_async_context(informer)
            await informer.wait_synced()
        async with anyio.create_task_group() as tg:
            started = anyio.Event()
            args = controller_args(server, namespace, time_scale=SCALE, **controller)
            tg.start_soon(partial(serve, args, started, clock, registry=system.registry))
            async with ProcessNode(
                transport,
                images=default_images(runner_environ(tofu) | _copier_env(copier)),
                name=node,
                namespace=namespace,
                log_dir=system.logs,
                # Short: OpenTofu's plugin sockets live under the runner's TMPDIR.
                pods_dir=pods_dir,
                crane=crane,
                images_dir=images_dir,
            ):
                with anyio.fail_after(30):
                    await started.wait()
                try:
                    yield system
                finally:
                    tg.cancel_scope.cancel()
    shutil.rmtree(pods_dir, ignore_errors=True)


def _copier_env(copier: Path | None) -> dict[str, str]:
    return {} if copier is None else {RunnerVar.COPIER.value: str(copier)}


async def in_background(
    system: contextlib.AbstractAsyncContextManager[System],
) -> tuple[System, Callable[[], Awaitable[None]]]:
    """Enters `system` in a task of its own and returns it with the function that stops it.

    An async fixture's setup and teardown run in different tasks, and a task group must be
    left by the task that entered it: the system lives in one task from start to stop."""
    ready: asyncio.Future[System] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        async with system as value:
            ready.set_result(value)
            await stop.wait()

    task = asyncio.create_task(hold(), name="e2e system")
    either: set[asyncio.Future[Any]] = {ready, task}
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        task.result()  # the start failed: raise why
        raise AssertionError("the system ended before it started")
    started = ready.result()

    def check() -> None:
        if task.done():
            task.result()
            raise AssertionError("the controller and node stopped early")

    started.check = check

    async def shutdown() -> None:
        stop.set()
        with anyio.fail_after(60):
            await task

    return started, shutdown
