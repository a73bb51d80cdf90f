"""The `captf` command line.

Arguments are declared here, in one place; each command's body lives in its own
module and is imported only when that command runs, so `captf decide -f` never
loads the I/O stack."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from controller.core.contract.roles import Role
from controller.core.spec.image import DEFAULT_SIZE_LIMIT
from controller.core.spec.policy import DEFAULT_IMAGES, DEFAULT_SERVICE_ACCOUNTS
from controller.io.config import DEFAULTS
from runtime.errors import ConfigError

Command = Callable[[argparse.Namespace], int]


def _handler(module: str, attr: str = "run") -> Callable[[argparse.Namespace], int]:
    """A command body, imported on first call."""

    def call(args: argparse.Namespace) -> int:
        fn: Command = getattr(importlib.import_module(module), attr)
        return fn(args)

    return call


def _add_kubeconfig(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster config)",
    )


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
        "--max-module-image-size",
        type=int,
        default=DEFAULT_SIZE_LIMIT,
        metavar="BYTES",
        help="the largest module image (spec.source.image) a Job may run: the sum of its "
        "layers' sizes as its manifest states them (default: %(default)s, 1 GiB)",
    )


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
    p.add_argument(
        "--max-concurrent-runs", type=int, default=10, help="run slots, as the controller's flag"
    )
    p.add_argument("-v", "--verbose", action="store_true", help="add the message and Job details")
    _add_runner_policy(p)
    _add_kubeconfig(p)
    p.set_defaults(func=_handler("controller.cli.decide_command"))


def _run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the controller")
    _add_kubeconfig(p)
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
        help="run-slot Leases",
    )
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
    p.set_defaults(func=_handler("controller.io.main"))


def _bench(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="benchmarks against a peer measured in the same run")
    bsub = p.add_subparsers(dest="bench", required=True)
    w = bsub.add_parser("watch", help="reflector+cache vs kubernetes_asyncio watch.Watch")
    w.add_argument("--objects", type=int, default=10_000)
    w.add_argument("--namespace", default="captf-bench")
    _add_kubeconfig(w)
    w.set_defaults(func=_handler("controller.bench.watch"))
    s = bsub.add_parser(
        "scale", help="the controller over N idle objects on its own API server: one JSON line"
    )
    s.add_argument("--objects", type=int, default=10_000, help="TerraformClusters, 100 a namespace")
    s.add_argument("--rate", type=float, default=100.0, help="spec changes per second")
    s.add_argument("--seconds", type=float, default=30.0, help="how long the changes last")
    s.add_argument(
        "--unrelated-secrets", type=int, default=0, help="Secrets no object reads, 2 KiB each"
    )
    s.add_argument("--crds", default="manifests/crds", help="the CRDs to install")
    s.set_defaults(func=_handler("controller.bench.scale"))


def _dev(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dev", help="local development: API server, process node, demo")
    dsub = p.add_subparsers(dest="dev", required=True)
    a = dsub.add_parser(
        "apiserver", help="start etcd, kube-apiserver and kube-controller-manager on loopback"
    )
    a.add_argument("--kubeconfig", default=".local/kubeconfig", help="where to write it")
    a.add_argument("--crds", default="manifests/crds", help="CRDs to install ('' for none)")
    a.add_argument(
        "--controller-manager",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run kube-controller-manager (Job, Deployment, GC, disruption controllers)",
    )
    a.set_defaults(func=_handler("runtime.envtest.cli"))
    n = dsub.add_parser("node", help="a Node whose pods run as local processes (a kubelet)")
    _add_kubeconfig(n)
    n.add_argument("--name", default="local", help="the Node's name")
    n.add_argument("--namespace", default=None, help="run only this namespace's pods")
    n.add_argument(
        "--log-dir", default=None, help="pod logs (default: $CAPTF_NODE_LOGS, .local/pod-logs)"
    )
    n.set_defaults(func=_handler("controller.dev.node.main"))
    d = dsub.add_parser("drain", help="cordon a node and evict its pods (Eviction API)")
    _add_kubeconfig(d)
    d.add_argument("--node", default="local")
    d.add_argument("--namespace", default=None, help="evict only this namespace's pods")
    d.add_argument("-l", "--selector", default=None, help="evict only pods with these labels")
    d.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to retry evictions a PDB refuses"
    )
    d.set_defaults(func=_handler("controller.dev.node.main", "run_drain"))
    u = dsub.add_parser("uncordon", help="make a drained node schedulable again")
    _add_kubeconfig(u)
    u.add_argument("--node", default="local")
    u.set_defaults(func=_handler("controller.dev.node.main", "run_uncordon"))
    c = dsub.add_parser("chart", help="generate charts/captf from manifests/")
    c.add_argument("--check", action="store_true", help="only compare; exit 1 if it differs")
    c.add_argument("--root", default=".", help="the repository's root")
    c.set_defaults(func=_handler("controller.dev.chart"))
    k = dsub.add_parser(
        "clusterctl", help="generate the clusterctl provider repository from manifests/"
    )
    k.add_argument("--check", action="store_true", help="only compare; exit 1 if it differs")
    k.add_argument("--root", default=".", help="the repository's root")
    k.set_defaults(func=_handler("controller.dev.clusterctl"))
    r = dsub.add_parser("run", help="the `make run` demo: control plane, node, controller")
    r.add_argument("--time-scale", type=float, default=30.0)
    r.add_argument(
        "--modules",
        default=None,
        metavar="DIR",
        help="role modules in DIR/cluster, DIR/machine, DIR/machinepool (examples/modules)",
    )
    r.set_defaults(func=_handler("controller.dev.demo"))


def _people(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands for people: read the cluster as the controller does, change only annotations."""
    g = sub.add_parser("get", help="a table of CAPTF objects: ready, op, wait, retry, last error")
    g.add_argument("kind", nargs="?", help="tfc, tfmp or tfm (any spelling; default: all kinds)")
    g.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    g.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
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


def _lint(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("lint", help="check what a module author publishes")
    lsub = p.add_subparsers(dest="lint", required=True)
    m = lsub.add_parser("module", help="a role module's directory against its role's contract")
    m.add_argument("directory", metavar="DIR", help="the module: its .tf and .tf.json files")
    m.add_argument("--role", required=True, choices=[role.value for role in Role])
    m.add_argument("--json", action="store_true", help="one JSON document: findings and summary")
    m.add_argument("--strict", action="store_true", help="warnings fail the module too (exit 1)")
    m.set_defaults(func=_handler("controller.cli.lint_command"))
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
    i.set_defaults(func=_handler("controller.cli.lint_image_command"))


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
    b.set_defaults(func=_handler("controller.cli.image_command"))


def _add_target(p: argparse.ArgumentParser, module: str) -> None:
    p.add_argument("-n", "--namespace", default="default")
    _add_kubeconfig(p)
    p.set_defaults(func=_handler(f"controller.{module}"))


def _runner(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("runner", help="the runner image's entrypoint (one Job's operation)")
    p.set_defaults(func=_handler("controller.runner.main"))


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="captf", description="CAPTF controller")
    sub = root.add_subparsers(dest="command", required=True)
    for add in (_decide, _people, _lint, _image, _run, _bench, _dev, _runner):
        add(sub)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    func: Command = args.func
    try:
        return func(args)
    except ConfigError as err:  # any command that talks to a cluster, before it starts
        print(f"captf: no cluster to talk to: {' '.join(str(err).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
