"""The test control plane is a real one: behaviours a mock would not have.

Also covers the launcher itself: restart, compaction, the kubeconfig, and the
`captf dev apiserver` command stopping without orphans."""

from __future__ import annotations

import base64
import contextlib
import select
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.envtest import ApiServer, RequestFailed
from runtime.envtest.client import Client

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
GROUP = "envtest.captf.dev"
WIDGETS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 10}
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"phase": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def widgets(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The Widget CRD installed; returns its group-version path."""
    directory = tmp_path_factory.mktemp("crds")
    (directory / "widgets.yaml").write_text(yaml.safe_dump(WIDGETS_CRD))
    assert apiserver.install_crds(directory) == [f"widgets.{GROUP}"]
    return f"/apis/{GROUP}/v1"


def widget(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


def test_version_is_the_pinned_release(apiserver: ApiServer) -> None:
    version = apiserver.request("GET", "/version")
    assert (version["gitVersion"], version["major"], version["minor"]) == ("v1.35.4", "1", "35")


def test_crd_schema_rejects_an_invalid_object(
    apiserver: ApiServer, namespace: str, widgets: str
) -> None:
    path = f"{widgets}/namespaces/{namespace}/widgets"
    with pytest.raises(RequestFailed) as caught:
        apiserver.request("POST", path, widget("too-small", 0))
    assert (caught.value.status, caught.value.reason) == (422, "Invalid")
    assert "spec.size in body should be greater than or equal to 1" in caught.value.message
    created = apiserver.request("POST", path, widget("fine", 1))
    assert created["spec"] == {"size": 1}


def test_status_subresource_ignores_spec_changes(
    apiserver: ApiServer, namespace: str, widgets: str
) -> None:
    path = f"{widgets}/namespaces/{namespace}/widgets"
    obj = apiserver.request("POST", path, widget("w", 3))
    obj["spec"]["size"] = 5
    obj["status"] = {"phase": "Ready"}
    updated = apiserver.request("PUT", f"{path}/w/status", obj)
    assert (updated["spec"], updated["status"]) == ({"size": 3}, {"phase": "Ready"})
    # And the main resource ignores status: each side owns its half.
    updated["spec"]["size"] = 7
    updated["status"] = {"phase": "Lost"}
    updated = apiserver.request("PUT", f"{path}/w", updated)
    stored = apiserver.request("GET", f"{path}/w")
    assert (stored["spec"], stored["status"]) == ({"size": 7}, {"phase": "Ready"})


def test_watch_sends_bookmarks(apiserver: ApiServer, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("a", "b", "c"):
        apiserver.request("POST", path, {"metadata": {"name": name, "labels": {"watched": "y"}}})
    params = {
        "labelSelector": "watched=y",
        "allowWatchBookmarks": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        # Besides one a minute, the watch cache sends a bookmark 2 s before a watch's
        # deadline -- if the resource has progressed since the watch began.
        "timeoutSeconds": "5",
    }
    events = []
    with apiserver.watch(path, params, timeout=15) as stream:
        for event in stream:
            events.append(event)
            if event["object"]["metadata"].get("annotations"):
                # A write we do not watch: it moves the resource's revision on.
                unseen = apiserver.request("POST", path, {"metadata": {"name": "unseen"}})
    kinds = [e["type"] for e in events]
    assert kinds[:4] == ["ADDED", "ADDED", "ADDED", "BOOKMARK"], kinds
    assert {e["object"]["metadata"]["name"] for e in events[:3]} == {"a", "b", "c"}
    initial_end = events[3]["object"]["metadata"]
    assert initial_end["annotations"] == {"k8s.io/initial-events-end": "true"}
    # Only bookmarks follow (the unlabelled write is not ours), and they carry its progress.
    assert len(kinds) > 4, kinds
    assert set(kinds[4:]) == {"BOOKMARK"}, kinds
    progress = events[-1]["object"]["metadata"]
    assert "annotations" not in progress
    assert int(progress["resourceVersion"]) >= int(unseen["metadata"]["resourceVersion"])


def test_lease_update_with_stale_resource_version_conflicts(
    apiserver: ApiServer, namespace: str
) -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    lease = apiserver.request("POST", path, {"metadata": {"name": "l"}, "spec": {}})
    first = {**lease, "spec": {"holderIdentity": "first"}}
    apiserver.request("PUT", f"{path}/l", first)
    second = {**lease, "spec": {"holderIdentity": "second"}}
    with pytest.raises(RequestFailed) as caught:
        apiserver.request("PUT", f"{path}/l", second)
    assert (caught.value.status, caught.value.reason) == (409, "Conflict")
    assert "the object has been modified" in caught.value.message
    stored = apiserver.request("GET", f"{path}/l")
    assert stored["spec"]["holderIdentity"] == "first"


def first_event(apiserver: ApiServer, path: str, resource_version: str) -> dict[str, Any]:
    """The first event of a watch from `resource_version`, or the refusal as an ERROR event."""
    params = {"resourceVersion": resource_version, "timeoutSeconds": "2"}
    try:
        with apiserver.watch(path, params, timeout=10) as stream:
            return next(stream, {"type": "NONE"})
    except RequestFailed as failed:
        return {"type": "ERROR", "object": failed.body}


def test_watch_from_compacted_revision_is_gone(apiserver: ApiServer, namespace: str) -> None:
    # podtemplates bypass the watch cache (launcher flag), so etcd itself answers.
    path = f"/api/v1/namespaces/{namespace}/podtemplates"
    template = {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    created = apiserver.request("POST", path, {"metadata": {"name": "t"}, "template": template})
    old = created["metadata"]["resourceVersion"]
    for value in ("1", "2"):
        patch = {"metadata": {"labels": {"changed": value}}}
        apiserver.request("PATCH", f"{path}/t", patch, "application/merge-patch+json")
    assert first_event(apiserver, path, old)["type"] == "MODIFIED"

    # A watch from `old` asks etcd for revision old+1 onwards: that must be compacted
    # away. (At exactly old+1 the watch starts, then fails with a 500: the event's
    # previous value is gone.)
    assert apiserver.etcd_compact() > int(old) + 1
    event = first_event(apiserver, path, old)
    assert event["type"] == "ERROR", event
    status = event["object"]
    assert (status["code"], status["reason"]) == (410, "Expired"), status
    assert "too old" in status["message"]


def test_restart_keeps_data_and_the_watch_cache_forgets_history(
    apiserver: ApiServer, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    old = apiserver.request("POST", path, {"metadata": {"name": "m"}, "data": {"k": "1"}})
    rv = old["metadata"]["resourceVersion"]
    patch = {"data": {"k": "2"}}
    apiserver.request("PATCH", f"{path}/m", patch, "application/merge-patch+json")
    assert first_event(apiserver, path, rv)["type"] == "MODIFIED"
    url = apiserver.url

    apiserver.restart_apiserver()
    assert apiserver.url == url
    assert apiserver.request("GET", f"{path}/m")["data"] == {"k": "2"}
    event = first_event(apiserver, path, rv)
    assert event["type"] == "ERROR", event
    assert event["object"]["code"] == 410
    assert "too old resource version" in event["object"]["message"]


def kubeconfig_client(kubeconfig: Path, directory: Path, *, with_cert: bool) -> Client:
    """A client built only from the kubeconfig file, as any other tool would."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    for key in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
        source = cluster if key.startswith("certificate-authority") else user
        (directory / key).write_bytes(base64.b64decode(source[key]))
    ctx = ssl.create_default_context(cafile=str(directory / "certificate-authority-data"))
    if with_cert:
        ctx.load_cert_chain(directory / "client-certificate-data", directory / "client-key-data")
    return Client(cluster["server"], ctx)


def test_kubeconfig_authenticates_as_system_masters_under_rbac(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    admin = kubeconfig_client(apiserver.kubeconfig, tmp_path, with_cert=True)
    review = admin.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
    assert "system:masters" in review["status"]["userInfo"]["groups"]
    anonymous = kubeconfig_client(apiserver.kubeconfig, tmp_path, with_cert=False)
    with pytest.raises(RequestFailed) as caught:
        anonymous.request("GET", "/api/v1/namespaces")
    assert caught.value.status == 403


# -- the `captf dev apiserver` command ------------------------------------------


def children(pid: int) -> list[int]:
    """Pids whose parent is `pid`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def dead(pid: int) -> bool:
    """Gone, or a zombie (dead but not yet reaped by whoever adopted it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@contextlib.contextmanager
def dev_apiserver(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, list[int]]]:
    """`captf dev apiserver` started; yields the process, its ready line and its children."""
    kubeconfig = tmp_path / "kubeconfig"
    argv = [sys.executable, "-m", "controller.cli.main", "dev", "apiserver"]
    proc = subprocess.Popen(
        [*argv, "--kubeconfig", str(kubeconfig), "--crds", ""],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        # A shell without job control starts background jobs with SIGINT ignored, and
        # that would be inherited: restore the default so Python installs its handler.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        readable, _, _ = select.select([proc.stdout], [], [], 120)
        assert readable, "no ready line within 120 s"
        line = proc.stdout.readline()
        assert line.startswith("API server ready in "), line
        assert str(kubeconfig) in line
        yield proc, line, children(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_dev_apiserver_stops_its_processes_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    with dev_apiserver(tmp_path) as (proc, _, kids):
        assert len(kids) == 3, kids  # etcd, kube-apiserver, kube-controller-manager
        proc.send_signal(sig)
        assert proc.wait(60) == 0
        # Reaped by the command itself: not even zombies remain.
        assert not any(Path(f"/proc/{pid}").exists() for pid in kids)


def test_dev_apiserver_children_die_with_a_killed_parent(tmp_path: Path) -> None:
    with dev_apiserver(tmp_path) as (proc, line, kids):
        assert len(kids) == 3, kids
        url = line.split(" at ", 1)[1].split()[0]
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while not all(dead(pid) for pid in kids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(dead(pid) for pid in kids)
        assert not Client(url, ssl.create_default_context()).ok("/readyz")
