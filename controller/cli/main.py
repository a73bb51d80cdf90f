"""The `captf` command line.

Arguments are declared here, and the developer commands' (`bench`, `dev`) in
dev_parsers.py; each command's body lives in its own module and is imported only
when that command runs (parser_kit.handler), so `captf decide -f` never loads the
I/O stack."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from controller.cli.dev_parsers import add_bench, add_dev
from controller.cli.no_cluster import no_cluster
from controller.cli.parser_kit import (
    Command,
    add_background_budget,
    add_kubeconfig,
    add_live,
    handler,
)
from controller.core.contract.roles import Role
from controller.core.decide.settings import JobDefaultsError, job_defaults
from controller.core.spec.image import DEFAULT_SIZE_LIMIT
from controller.core.spec.module_mount import AUTO, MOUNTS
from controller.core.spec.policy import DEFAULT_IMAGES, DEFAULT_SERVICE_ACCOUNTS
from controller.io.config import DEFAULTS
from runtime.errors import ConfigError


def _add_runner_policy(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allowed-images",
        default=",".join(DEFAULT_IMAGES),
        metavar="GLOBS",
        help="comma-separated globs the runner image of an object must match "
        "(default: %(default)s, the image the Deployment ships)",
    )
    p.add_argument(
        "--allowed-service-accounts",
        default=",".join(DEFAULT_SERVICE_ACCOUNTS),
        metavar="GLOBS",
        help="comma-separated globs for spec.jobs.serviceAccountName; the first plain name is "
        "what Jobs run as when an object names none (default: %(default)s)",
    )
    p.add_argument(
        "--cannot-start-grace",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long a Job whose pods cannot be created or whose image cannot be pulled "
        "is reported before it is ended as a failure (default: %(default)gs; on the "
        "decision clock)",
    )
    p.add_argument(
        "--job-defaults",
        type=_job_defaults,
        default={},
        metavar="JSON",
        help="a JSON object of spec.jobs pod policy fields (resources, imagePullSecrets, "
        "podSecurityContext, securityContext, nodeSelector, tolerations, affinity, "
        "priorityClassName, env) for objects whose own and whose cluster's leave them unset",
    )
    p.add_argument(
        "--module-image-mount",
        choices=MOUNTS,
        default=AUTO,
        help="how a Job's pod gets a module image: volume (an image volume, Kubernetes 1.35 "
        "on), copy (init containers copy it into an emptyDir; any version), auto (volume "
        "when the API server keeps the image volume of a dry-run Job, else copy; by its "
        "version when the dry run is refused; default)",
    )
    p.add_argument(
        "--max-module-image-size",
        type=int,
        default=DEFAULT_SIZE_LIMIT,
        metavar="BYTES",
        help="the largest module image (spec.source.image) a Job may run: the sum of its "
        "layers' sizes as its manifest states them (default: %(default)s, 1 GiB)",
    )


def _job_defaults(text: str) -> dict[str, object]:
    try:
        return job_defaults(text)
    except JobDefaultsError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _decide(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("decide", help="print the decision DecideOp makes for one object")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "-f",
        "--file",
        nargs="+",
        action="extend",
        metavar="FILE",
        help="snapshot YAML (- for standard input): `now` and `objects`, CAPTF object first;"
        " several files (or -f repeated) print one line each, prefixed with the file name",
    )
    src.add_argument("--live", metavar="KIND/NAME", help="read the snapshot from the cluster")
    p.add_argument("-n", "--namespace", default="default", help="namespace for --live")
    p.add_argument("--now", help="RFC 3339 time to decide at with --live (default: the clock)")
    # The run-slot flags default to None: unset, a file's `flags:` (else captf run's
    # default) applies (controller/cli/decide_settings.py).
    p.add_argument(
        "--max-concurrent-runs",
        type=int,
        default=None,
        help="run slots, as the controller's flag (default: the file's flags, else 10)",
    )
    p.add_argument(
        "--max-concurrent-runs-per-cluster",
        type=int,
        default=None,
        help="run slots one cluster's Jobs may hold, as the controller's flag (0: no cap; "
        "default: the file's flags, else 0)",
    )
    add_background_budget(p, None)
    p.add_argument(
        "--controller-namespace",
        default=None,
        help="the controller's namespace, where it keeps its run slots, as its flag (default: "
        "the file's flags, else the one namespace the snapshot's run slots are in)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="add the message and Job details")
    _add_runner_policy(p)
    add_live(p)
    p.set_defaults(func=handler("controller.cli.decide_command"))


def _run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the controller")
    add_kubeconfig(p)
    p.add_argument("--namespace", default=None, help="watch only this namespace (default: all)")
    p.add_argument(
        "--namespaces",
        default=None,
        metavar="A,B",
        help="watch only these namespaces, one watch each: the controller then needs Roles "
        "in them, no ClusterRole (variants/namespaced; default: all)",
    )
    p.add_argument(
        "--controller-namespace",
        default=None,
        help="namespace of run-slot and leader Leases (default: from the pod, else 'default')",
    )
    p.add_argument(
        "--max-concurrent-runs",
        type=int,
        default=DEFAULTS.max_concurrent_runs,
        help="run-slot Leases: Jobs running at once (docs/controller.md#run-slots)",
    )
    p.add_argument(
        "--max-concurrent-runs-per-cluster",
        type=int,
        default=DEFAULTS.max_concurrent_runs_per_cluster,
        help="run slots the Jobs of one Cluster API cluster may hold at once, so one cluster "
        "scaling up cannot take them all; 0: no cap (docs/controller.md#run-slots)",
    )
    add_background_budget(p, (DEFAULTS.background_run_share, DEFAULTS.background_jobs_per_minute))
    p.add_argument("--workers", type=int, default=DEFAULTS.workers, help="concurrent reconciles")
    p.add_argument(
        "--kept-plans",
        type=int,
        default=DEFAULTS.kept_plans,
        help="finished TerraformPlans (Applied, Superseded, Changed) kept per object",
    )
    p.add_argument(
        "--watch-label-selector",
        default=None,
        help="shard: reconcile only the CAPTF objects this label selector matches, "
        "e.g. 'sharding.captf.io/key in (shard1)'",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS.leader_elect,
        help="run leader-elected on a Lease",
    )
    p.add_argument("--leader-election-id", default=DEFAULTS.leader_election_id)
    p.add_argument(
        "--metrics-addr",
        default=DEFAULTS.metrics_addr,
        help="/metrics (and, without --metrics-secure, /healthz and /readyz)",
    )
    p.add_argument(
        "--metrics-secure",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS.metrics_secure,
        help="serve /metrics over HTTPS to bearer tokens allowed `get` on /metrics "
        "(TokenReview, SubjectAccessReview); the probes move to --health-probe-addr",
    )
    p.add_argument(
        "--metrics-object-names",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS.metrics_object_names,
        help="label the per-object gauges (captf_object_*) with the object's name; "
        "--no-metrics-object-names aggregates them per namespace and kind instead",
    )
    p.add_argument(
        "--metrics-cert-dir",
        default=DEFAULTS.metrics_cert_dir,
        help="tls.crt and tls.key for --metrics-secure (default: self-signed at start)",
    )
    p.add_argument(
        "--health-probe-addr",
        default=DEFAULTS.health_probe_addr,
        help="/healthz and /readyz, plain HTTP, with --metrics-secure",
    )
    p.add_argument(
        "--webhook-addr",
        default=DEFAULTS.webhook_addr,
        help="serve the admission webhooks (/validate, /mutate-terraformplan) over HTTPS "
        "here, e.g. 0.0.0.0:9443 (default: not served)",
    )
    p.add_argument(
        "--webhook-cert-dir",
        default=DEFAULTS.webhook_cert_dir,
        help="tls.crt and tls.key for --webhook-addr, reloaded when they change "
        "(default: self-signed at start)",
    )
    _add_runner_policy(p)
    p.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULTS.time_scale,
        help="compress controller time: one minute lasts 60/K seconds (demos and tests)",
    )
    p.add_argument(
        "--log-format",
        choices=("json", "text"),
        default=None,
        help="json: one object per line; text: for people (default: text on a terminal, else json)",
    )
    p.set_defaults(func=handler("controller.io.main"))


def _people(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands for people: read the cluster as the controller does, change only annotations."""
    g = sub.add_parser("get", help="a table of CAPTF objects: ready, op, wait, retry, last error")
    g.add_argument("kind", nargs="?", help="tfc, tfmp or tfm (any spelling; default: all kinds)")
    g.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    g.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table")
    g.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="the controller's --time-scale: count down on its timeline (make run: 30)",
    )
    g.add_argument(
        "--controller-namespace",
        default="default",
        help="where a scaled controller records its time origin",
    )
    _add_target(g, "cli.people.get")
    a = sub.add_parser("approve", help="approve exactly the TerraformPlan an object waits on")
    a.add_argument("ref", metavar="KIND/NAME")
    _add_target(a, "cli.people.approve")
    p = sub.add_parser("plan", help="TerraformPlans: plans that wait for approval")
    psub = p.add_subparsers(dest="plan", required=True)
    show = psub.add_parser(
        "show", help="the plan an object waits on (KIND/NAME), or a TerraformPlan by name"
    )
    show.add_argument("ref", metavar="KIND/NAME|PLAN")
    _add_target(show, "cli.people.plan_show")
    r = sub.add_parser("restore", help="restore an object's state from a backup serial")
    r.add_argument("ref", metavar="KIND/NAME")
    r.add_argument("--serial", type=int, required=True, help="the backup's state serial")
    _add_target(r, "cli.people.restore")
    _state(sub)


def _state(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`captf state`: an object's state for an operator (docs/cli.md, "captf state")."""
    s = sub.add_parser("state", help="an object's Terraform state: list, pull, push")
    ssub = s.add_subparsers(dest="state", required=True)
    ls = ssub.add_parser("list", help="the state and its backups: serial, size, writer")
    ls.add_argument("ref", metavar="KIND/NAME")
    ls.add_argument("-o", "--output", choices=("table", "json"), default="table")
    pull = ssub.add_parser("pull", help="the state as plain JSON, to stdout or a file")
    pull.add_argument("ref", metavar="KIND/NAME")
    pull.add_argument("file", nargs="?", metavar="FILE", help="where to write it (default: -)")
    pull.add_argument("--serial", type=int, default=None, help="a backup's serial instead")
    push = ssub.add_parser(
        "push", help="replace the state of a paused or suspended object (a backup first)"
    )
    push.add_argument("ref", metavar="KIND/NAME")
    push.add_argument("file", metavar="FILE", help="the state's JSON; - reads stdin")
    for p, attr in ((ls, "run_list"), (pull, "run_pull"), (push, "run_push")):
        p.add_argument("-n", "--namespace", default="default")
        add_live(p)
        p.set_defaults(func=handler("controller.cli.people.state", attr))


def _lint(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("lint", help="check what a module author publishes")
    lsub = p.add_subparsers(dest="lint", required=True)
    m = lsub.add_parser("module", help="a role module's directory against its role's contract")
    m.add_argument("directory", metavar="DIR", help="the module: its .tf and .tf.json files")
    m.add_argument("--role", required=True, choices=[role.value for role in Role])
    m.add_argument("--json", action="store_true", help="one JSON document: findings and summary")
    m.add_argument("--strict", action="store_true", help="warnings fail the module too (exit 1)")
    m.set_defaults(func=handler("controller.cli.lint_command"))
    i = lsub.add_parser("image", help="a pushed module image against the image contract")
    i.add_argument("reference", metavar="REF", help="the image: registry/repo:tag or @sha256:...")
    i.add_argument("--role", required=True, choices=[role.value for role in Role])
    i.add_argument("--json", action="store_true", help="one JSON document: findings and summary")
    i.add_argument("--strict", action="store_true", help="warnings fail the image too (exit 1)")
    i.add_argument(
        "--platform",
        metavar="OS/ARCH",
        help="the platform to check (default: linux/amd64 of an index; a single image as it is)",
    )
    i.set_defaults(func=handler("controller.cli.lint_image_command"))


def _policy(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("policy", help="TerraformPolicies: test them on a plan, offline")
    psub = p.add_subparsers(dest="policy", required=True)
    t = psub.add_parser("test", help="judge a plan (tofu show -json) by policies, as the runner")
    t.add_argument("policy", metavar="POLICY.yaml", help="one or more TerraformPolicy documents")
    t.add_argument("plan", metavar="PLAN.json", help="tofu show -json of a saved plan")
    t.add_argument("--object", metavar="FILE", help="the CAPTF object: selectors pick by it")
    t.add_argument("--namespace-labels", metavar="K=V,...", help="its Namespace's labels")
    t.add_argument("--cluster-labels", metavar="K=V,...", help="its Cluster's labels")
    t.add_argument("--approved", action="store_true", help="as the apply of an approved plan")
    t.add_argument("--json", action="store_true", help="one JSON document, with the cost")
    t.set_defaults(func=handler("controller.cli.policy_command"))


def _image(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("image", help="module images: the module, OpenTofu, a provider mirror")
    isub = p.add_subparsers(dest="image", required=True)
    b = isub.add_parser("build", help="build a module image from a directory, push it")
    b.add_argument("directory", metavar="DIR", help="the role module's directory")
    b.add_argument("--role", required=True, choices=[role.value for role in Role])
    b.add_argument("--tag", required=True, metavar="REF", help="where to push: registry/repo:tag")
    b.add_argument(
        "--runtime", metavar="PATH", help="the OpenTofu binary (default: the local build's)"
    )
    b.add_argument(
        "--providers",
        metavar="PATH",
        help="a provider filesystem mirror to take the required providers from"
        " (default: the local build's)",
    )
    b.add_argument(
        "--capacity",
        metavar="RES=QTY,...",
        help="scale from zero: the node's capacity, e.g. cpu=4,memory=16Gi (io.captf.capacity)",
    )
    b.add_argument(
        "--node-info",
        metavar="KEY=VALUE,...",
        help="scale from zero: e.g. architecture=amd64,operatingSystem=linux (io.captf.node-info)",
    )
    b.set_defaults(func=handler("controller.cli.image_command"))


def _add_target(p: argparse.ArgumentParser, module: str) -> None:
    p.add_argument("-n", "--namespace", default="default")
    add_live(p)
    p.set_defaults(func=handler(f"controller.{module}"))


def _runner(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("runner", help="the runner image's entrypoint (one Job's operation)")
    p.set_defaults(func=handler("controller.runner.main"))
    c = sub.add_parser(
        "install-copier",
        help="the runner image's static copier into DEST (a module image Job's first init "
        "container, in the copy shape)",
    )
    c.add_argument("dest", metavar="DEST")
    c.set_defaults(func=handler("controller.runner.copier"))


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="captf", description="CAPTF controller")
    sub = root.add_subparsers(dest="command", required=True)
    for add in (_decide, _people, _lint, _policy, _image, _run, add_bench, add_dev, _runner):
        add(sub)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    func: Command = args.func
    try:
        return func(args)
    except ConfigError as err:  # any command that talks to a cluster, before it starts
        return no_cluster(err)


if __name__ == "__main__":
    sys.exit(main())
