"""kube-controller-manager beside kube-apiserver: the controllers a CAPTF install relies on.

It runs with its own client certificate (user system:kube-controller-manager, bound
by the bootstrap RBAC policy) and `--use-service-account-credentials`, so each
controller acts as its own kube-system ServiceAccount with the role a real cluster
gives it, its token minted through TokenRequest. It shares the service-account
signing key with kube-apiserver (the legacy token controller signs with it) and
publishes the envtest CA as `kube-root-ca.crt` in every namespace.

Ready means: `/healthz` answers, and the ServiceAccount controller has created
`default/default` (pods of a namespace are admitted only once its default
ServiceAccount exists, so this is the first thing a test would wait for)."""

from __future__ import annotations

from pathlib import Path

from runtime.envtest.pki import Pki

# What a CAPTF install needs of a control plane, and what makes the node lifecycle real.
CONTROLLERS = (
    "job-controller",
    "ttl-after-finished-controller",
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "disruption-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "pod-garbage-collector-controller",
    # The built-in view, edit and admin ClusterRoles take their rules from the roles
    # labelled to aggregate into them.
    "clusterrole-aggregation-controller",
    # A ResourceQuota refuses pods only once this controller has computed its status:
    # without it a quota is never enforced, and a Job it would stop starts anyway.
    "resourcequota-controller",
)


def controller_manager_argv(
    binary: Path, *, kubeconfig: Path, pki: Pki, port: int, workdir: Path
) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={workdir / 'controller-manager-certs'}",
        f"--controllers={','.join(CONTROLLERS)}",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.sa_signing_key}",
        f"--root-ca-file={pki.ca_cert}",
        # One instance, throwaway data: a leader Lease only delays the start.
        "--leader-elect=false",
        # The serving port is for our readiness poll only; /healthz is always allowed.
        "--authentication-skip-lookup=true",
    ]
