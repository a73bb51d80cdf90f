"""A container's environment, resolved from its pod as a kubelet does."""

from __future__ import annotations

import base64

import pytest

from controller.dev.node import env as ctr
from runtime.jsonobj import Json


class Objects:
    """Secrets and ConfigMaps by (kind, namespace, name); records what was read."""

    def __init__(self, objects: dict[tuple[str, str, str], Json]) -> None:
        self.objects = objects
        self.reads: list[tuple[str, str, str]] = []

    async def read(self, kind: str, namespace: str, name: str) -> Json | None:
        self.reads.append((kind, namespace, name))
        return self.objects.get((kind, namespace, name))


def secret(**data: str) -> Json:
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


POD: Json = {
    "metadata": {"name": "j-abcde", "namespace": "ns", "labels": {"app": "captf"}, "uid": "u1"},
    "spec": {"serviceAccountName": "captf-runner", "nodeName": "local"},
    "status": {"podIP": "127.1.0.7", "hostIP": "127.0.0.1"},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "1"),
        ("x$(A)y$(B)", "x1y2"),
        ("$(MISSING)", "$(MISSING)"),
        ("$$(A)", "$(A)"),
        ("$$", "$"),
        ("$A", "$A"),
        ("$(", "$("),
    ],
)
def test_expand_as_kubernetes(text: str, expected: str) -> None:
    assert ctr.expand(text, {"A": "1", "B": "2"}) == expected


async def test_env_precedence_envfrom_then_env_in_order() -> None:
    objects = Objects(
        {
            ("secrets", "ns", "s"): secret(A="from-secret", B="b"),
            ("configmaps", "ns", "c"): {"data": {"A": "from-cm", "C": "c"}},
        }
    )
    container = {
        "envFrom": [{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "c"}, "prefix": "P_"}],
        "env": [
            {"name": "B", "value": "literal"},
            {"name": "D", "value": "$(B)-$(P_C)"},
            {"name": "B", "value": "last"},
        ],
    }
    env = await ctr.container_env(container, POD, objects)
    assert env == {"A": "from-secret", "B": "last", "P_A": "from-cm", "P_C": "c", "D": "literal-c"}


async def test_value_from_secret_configmap_and_fields() -> None:
    objects = Objects(
        {
            ("secrets", "ns", "s"): secret(token="t0k"),
            ("configmaps", "ns", "c"): {"data": {"k": "v"}},
        }
    )
    container = {
        "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
            {"name": "K", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        ]
    }
    env = await ctr.container_env(container, POD, objects)
    assert env == {
        "TOKEN": "t0k",
        "K": "v",
        "POD": "j-abcde",
        "NS": "ns",
        "SA": "captf-runner",
        "APP": "captf",
        "IP": "127.1.0.7",
        "NODE": "local",
        "UID": "u1",
    }


async def test_a_missing_secret_or_key_is_missing_unless_optional() -> None:
    objects = Objects({("secrets", "ns", "s"): secret(a="1")})
    for ref in ({"name": "absent", "key": "a"}, {"name": "s", "key": "b"}):
        container = {"env": [{"name": "X", "valueFrom": {"secretKeyRef": ref}}]}
        with pytest.raises(ctr.Missing):
            await ctr.container_env(container, POD, objects)
    optional = {
        "env": [
            {
                "name": "X",
                "valueFrom": {"secretKeyRef": {"name": "absent", "key": "a", "optional": True}},
            },
            {
                "name": "Y",
                "valueFrom": {"secretKeyRef": {"name": "s", "key": "b", "optional": True}},
            },
        ],
        "envFrom": [{"configMapRef": {"name": "absent", "optional": True}}],
    }
    assert await ctr.container_env(optional, POD, objects) == {}


async def test_a_missing_envfrom_source_is_missing() -> None:
    container = {"envFrom": [{"secretRef": {"name": "absent"}}]}
    with pytest.raises(ctr.Missing):
        await ctr.container_env(container, POD, Objects({}))


async def test_what_is_not_emulated_is_refused() -> None:
    resource = {
        "env": [{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]
    }
    with pytest.raises(ctr.Unsupported):
        await ctr.container_env(resource, POD, Objects({}))
    field = {"env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}]}
    with pytest.raises(ctr.Unsupported):
        await ctr.container_env(field, POD, Objects({}))
