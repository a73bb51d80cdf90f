"""What the tests of API versions need on a real API server: our CRDs as the release before
v1beta1 had them (v1alpha1 alone, stored), as they are now with their conversion webhook
called on loopback, and that webhook served from a thread for tests that are not async
(hypothesis drives its examples synchronously)."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from controller.dev.install import LoopbackWebhook, free_port
from controller.io.admission import CONVERT_PATH, converted
from runtime.admission import AdmissionServer
from runtime.envtest.crds import crd_documents
from runtime.jsonobj import Json

ROOT = Path(__file__).resolve().parents[1]
OUR_CRDS = ROOT / "manifests" / "crds"


def older_crds() -> list[Json]:
    """Each CRD with v1alpha1 alone, stored, and no conversion: what v0.1.0 installed."""
    out = []
    for crd in crd_documents(OUR_CRDS):
        old = copy.deepcopy(crd)
        [version] = [v for v in old["spec"]["versions"] if v["name"] == "v1alpha1"]
        for key in ("deprecated", "deprecationWarning"):
            version.pop(key, None)
        version["storage"] = True
        old["spec"]["versions"] = [version]
        old["spec"].pop("conversion", None)
        old["metadata"].pop("annotations", None)
        old["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"] = "v1alpha1"
        out.append(old)
    return out


def current_crds(webhook: LoopbackWebhook) -> list[Json]:
    """Each CRD as manifests/crds holds it, converting through `webhook`."""
    return [webhook.crd(crd) for crd in crd_documents(OUR_CRDS)]


def write_crds(crds: list[Json], directory: Path) -> Path:
    """`crds` as files of `directory`, for ApiServer.install_crds."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.yaml"):
        old.unlink()
    for crd in crds:
        (directory / f"{crd['metadata']['name']}.yaml").write_text(json.dumps(crd))
    return directory


def webhook_cert_dir(webhook: LoopbackWebhook, directory: Path) -> Path:
    """tls.crt and tls.key of `webhook`, as the controller reads them (--webhook-cert-dir)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(webhook.cert)
    (directory / "tls.key").write_bytes(webhook.key)
    return directory


@contextmanager
def threaded_conversion(directory: Path) -> Iterator[LoopbackWebhook]:
    """The controller's conversion webhook (controller/io/admission.py) on a loopback port,
    in a thread with its own event loop, until the block ends."""
    webhook = LoopbackWebhook.make(free_port())
    certs = webhook_cert_dir(webhook, directory)
    ready, stop = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    async def serve() -> None:
        conversions = {CONVERT_PATH: converted}
        server = AdmissionServer(
            {}, address=f"127.0.0.1:{webhook.port}", cert_dir=certs, conversions=conversions
        )
        async with server:
            ready.set()
            await asyncio.to_thread(stop.wait)

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as error:  # reported by the caller's block
            failed.append(error)
            ready.set()

    thread = threading.Thread(target=run, name="conversion webhook", daemon=True)
    thread.start()
    ready.wait(30)
    if failed:
        raise failed[0]
    try:
        yield webhook
    finally:
        stop.set()
        thread.join(10)
