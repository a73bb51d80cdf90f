"""The arguments of the commands for developers, not operators: `captf bench` (benchmarks
against a peer measured in the same run) and `captf dev` (local API server, process
node, generated chart and clusterctl repository, the `make run` demo)."""

from __future__ import annotations

import argparse

from controller.cli.parser_kit import add_kubeconfig, handler


def add_bench(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="benchmarks against a peer measured in the same run")
    bsub = p.add_subparsers(dest="bench", required=True)
    w = bsub.add_parser("watch", help="reflector+cache vs kubernetes_asyncio watch.Watch")
    w.add_argument("--objects", type=int, default=10_000)
    w.add_argument("--namespace", default="captf-bench")
    add_kubeconfig(w)
    w.set_defaults(func=handler("controller.bench.watch"))
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
    s.set_defaults(func=handler("controller.bench.scale"))
    st = bsub.add_parser(
        "state", help="state writes of 1 KiB, 5 MiB, 40 MiB; controller RSS by state size"
    )
    st.add_argument("--objects", type=int, default=100, help="objects for the RSS comparison")
    st.add_argument("--crds", default="manifests/crds", help="the CRDs to install")
    st.set_defaults(func=handler("controller.bench.state"))
    c = bsub.add_parser(
        "capi",
        help="scale a MachineDeployment to N and back under Cluster API's manager, against it,"
        " kube-apiserver and bare OpenTofu in the same run: one JSON line",
    )
    c.add_argument("--machines", type=int, default=100, help="the MachineDeployment's scale")
    c.add_argument("--max-concurrent-runs", type=int, default=10, help="the controller's run slots")
    c.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="the controller's time compression (make run's is 30: its timed waits and "
        "cache lifetimes then pass 30 times faster than Cluster API's)",
    )
    c.set_defaults(func=handler("controller.bench.capi"))
    _add_fleet(bsub)


def _add_fleet(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    f = bsub.add_parser(
        "fleet",
        help="N Machines in C clusters held for H hours of controller time with their"
        " schedules on, a scale-up in quiet slots and one during the hold: one JSON line",
    )
    f.add_argument("--machines", type=int, default=30, help="Machines in all (N)")
    f.add_argument("--clusters", type=int, default=3, help="Cluster API clusters (C)")
    f.add_argument("--hours", type=float, default=1.0, help="controller hours held (H)")
    f.add_argument("--time-scale", type=float, default=30.0, help="controller minutes per 60/K s")
    f.add_argument(
        "--job-seconds", type=float, default=2.0, help="each Job's read of a machine (wall s)"
    )
    f.add_argument(
        "--scale-up",
        type=int,
        default=0,
        help="Machines each scale-up adds to each cluster"
        " (default: a third of N, spread over the clusters)",
    )
    f.add_argument("--max-concurrent-runs", type=int, default=10, help="the controller's run slots")
    f.add_argument(
        "--controller-arg",
        action="append",
        default=[],
        help="a further flag of the controller (repeat), e.g."
        " --controller-arg=--background-run-share=0.5",
    )
    f.set_defaults(func=handler("controller.bench.fleet"))


def add_dev(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    a.set_defaults(func=handler("runtime.envtest.cli"))
    n = dsub.add_parser("node", help="a Node whose pods run as local processes (a kubelet)")
    add_kubeconfig(n)
    n.add_argument("--name", default="local", help="the Node's name")
    n.add_argument("--namespace", default=None, help="run only this namespace's pods")
    n.add_argument(
        "--log-dir", default=None, help="pod logs (default: $CAPTF_NODE_LOGS, .local/pod-logs)"
    )
    n.set_defaults(func=handler("controller.dev.node.main"))
    d = dsub.add_parser("drain", help="cordon a node and evict its pods (Eviction API)")
    add_kubeconfig(d)
    d.add_argument("--node", default="local")
    d.add_argument("--namespace", default=None, help="evict only this namespace's pods")
    d.add_argument("-l", "--selector", default=None, help="evict only pods with these labels")
    d.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to retry evictions a PDB refuses"
    )
    d.set_defaults(func=handler("controller.dev.node.main", "run_drain"))
    u = dsub.add_parser("uncordon", help="make a drained node schedulable again")
    add_kubeconfig(u)
    u.add_argument("--node", default="local")
    u.set_defaults(func=handler("controller.dev.node.main", "run_uncordon"))
    v = dsub.add_parser(
        "crds", help="write each CRD's v1beta1 from its v1alpha1 and the declared changes"
    )
    v.add_argument("--check", action="store_true", help="only compare; exit 1 if it differs")
    v.add_argument("--root", default=".", help="the repository's root")
    v.set_defaults(func=handler("controller.dev.crd_versions"))
    c = dsub.add_parser("chart", help="generate charts/captf from manifests/")
    c.add_argument("--check", action="store_true", help="only compare; exit 1 if it differs")
    c.add_argument("--root", default=".", help="the repository's root")
    c.set_defaults(func=handler("controller.dev.chart"))
    k = dsub.add_parser(
        "clusterctl", help="generate the clusterctl provider repository from manifests/"
    )
    k.add_argument("--check", action="store_true", help="only compare; exit 1 if it differs")
    k.add_argument("--root", default=".", help="the repository's root")
    k.set_defaults(func=handler("controller.dev.clusterctl"))
    rel = dsub.add_parser(
        "release", help="write a clusterctl release (clusterctl/infrastructure-terraform/VERSION/)"
    )
    rel.add_argument("--version", required=True, help="the release, vX.Y.Z")
    rel.add_argument(
        "--image",
        default="ghcr.io/captf-io/captf",
        help="the controller and runner image's repository",
    )
    rel.add_argument("--check", action="store_true", help="only compare; exit 1 if it differs")
    rel.add_argument("--root", default=".", help="the repository's root")
    rel.set_defaults(func=handler("controller.dev.clusterctl", "run_release"))
    r = dsub.add_parser("run", help="the `make run` demo: control plane, node, controller")
    r.add_argument("--time-scale", type=float, default=30.0)
    r.add_argument(
        "--modules",
        default=None,
        metavar="DIR",
        help="role modules in DIR/cluster, DIR/machine, DIR/machinepool (examples/modules)",
    )
    r.set_defaults(func=handler("controller.dev.demo"))
