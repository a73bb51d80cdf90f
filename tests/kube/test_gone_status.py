"""The real API server's 404 for a status write of a deleted CAPTF object names that
object, as the reconciler's 'gone' check reads it (controller/io/reconciler.py)."""

from __future__ import annotations

import pytest

from controller.core.basics.names import MACHINE
from controller.io import api
from runtime.envtest import ApiServer
from runtime.errors import ApiError, is_not_found
from runtime.transport import open_transport
from tests.builders import captf

pytestmark = pytest.mark.kube


async def test_a_status_write_of_a_deleted_object_is_its_own_not_found(
    apiserver: ApiServer, namespace: str
) -> None:
    machine = captf(MACHINE, "m1")
    machine["metadata"] = {"name": "m1", "namespace": namespace}
    machine.pop("status")
    resource = api.OBJECTS[MACHINE]
    async with open_transport(str(apiserver.kubeconfig)) as transport:
        await transport.request("POST", api.object_path(MACHINE, namespace), body=machine)
        await transport.request("DELETE", api.object_path(MACHINE, namespace, "m1"), body={})
        with pytest.raises(ApiError) as raised:
            await api.patch_status(transport, machine, {"stateSerial": 1})
    gone = raised.value
    assert is_not_found(gone, group=resource.group, plural=resource.plural, name="m1")
    assert not is_not_found(gone, group=resource.group, plural=resource.plural, name="m2")
    assert not is_not_found(gone, group="", plural="secrets", name="m1")
