"""The two shapes of a module image Job, and how the controller picks one."""

from __future__ import annotations

import pytest

from controller.core.basics.runner_vars import RunnerVar
from controller.core.decide.decision import Run
from controller.core.decide.settings import settings_of
from controller.core.plan import jobspec
from controller.core.spec.inputs import render
from controller.core.spec.module_mount import COPY, VOLUME, mount_of, version_of
from controller.core.spec.policy import read_policy
from runtime.jsonobj import Json

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("info", "version"),
    [
        ({"major": "1", "minor": "35"}, (1, 35)),
        ({"major": "1", "minor": "34+"}, (1, 34)),  # managed offerings
        ({"major": "1", "minor": ""}, None),
        ({}, None),
    ],
)
def test_the_version_is_read_as_managed_offerings_write_it(
    info: Json, version: tuple[int, int] | None
) -> None:
    assert version_of(info) == version


@pytest.mark.parametrize(
    ("flag", "version", "shape"),
    [
        ("auto", (1, 35), VOLUME),
        ("auto", (1, 36), VOLUME),
        ("auto", (2, 0), VOLUME),
        ("auto", (1, 34), COPY),
        ("auto", (1, 32), COPY),
        ("auto", None, COPY),  # unknown: the shape that works everywhere
        ("volume", (1, 30), VOLUME),
        ("copy", (1, 35), COPY),
    ],
)
def test_the_shape_is_the_flag_s_or_the_version_s(
    flag: str, version: tuple[int, int] | None, shape: str
) -> None:
    assert mount_of(flag, version) == shape

    class Flags:
        max_concurrent_runs = 10
        allowed_images = "*"
        allowed_service_accounts = "*"
        module_image_mount = flag

    assert settings_of(Flags(), server_version=version).module_image_mount == shape


@pytest.mark.parametrize(
    ("flag", "version", "kept", "shape"),
    [
        # The API server's dry run wins over its version: a v1.35 with the gate off...
        ("auto", (1, 35), False, COPY),
        # ...and an older one with the gate turned on.
        ("auto", (1, 33), True, VOLUME),
        ("auto", None, True, VOLUME),
        # The dry run refused: the version decides, as before.
        ("auto", (1, 35), None, VOLUME),
        ("auto", (1, 34), None, COPY),
        # The flag's own shape is never second-guessed.
        ("volume", (1, 35), False, VOLUME),
        ("copy", (1, 35), True, COPY),
    ],
)
def test_auto_takes_the_dry_run_s_answer_else_the_version_s(
    flag: str, version: tuple[int, int] | None, kept: bool | None, shape: str
) -> None:
    assert mount_of(flag, version, kept) == shape

    class Flags:
        max_concurrent_runs = 10
        allowed_images = "*"
        allowed_service_accounts = "*"
        module_image_mount = flag

    settings = settings_of(Flags(), server_version=version, image_volumes=kept)
    assert settings.module_image_mount == shape


def _job(mount: str, jobs: Json | None = None) -> Json:
    spec: Json = {
        "source": {"image": f"registry.local/m@{DIGEST}", "imagePullPolicy": "Always"},
        "jobs": {"image": "captf:dev", **(jobs or {})},
    }
    obj = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformCluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
        "spec": spec,
    }
    inputs = render(spec, {}, {})
    run = Run(op="apply", reason="NoState", retry=1)
    policy = read_policy(spec)
    return jobspec.build_job(
        obj, run, inputs=inputs, policy=policy, seq=1, name="c-apply-1", mount=mount
    )


def _runner_view(job: Json) -> tuple[Json, str]:
    [container] = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    [mount] = [m for m in container["volumeMounts"] if m["name"] == "module-image"]
    return mount, env[RunnerVar.MODULE_IMAGE_DIR.value]


def test_the_runner_sees_the_same_in_both_shapes() -> None:
    assert _runner_view(_job(VOLUME)) == _runner_view(_job(COPY))
    mount, directory = _runner_view(_job(COPY))
    assert mount == {"name": "module-image", "mountPath": "/module-image", "readOnly": True}
    assert directory == "/module-image/captf"


def test_the_copy_shape_copies_the_image_with_our_copier_through_two_emptydirs() -> None:
    job = _job(COPY, {"resources": {"requests": {"cpu": "1"}}})
    assert job["metadata"]["annotations"]["captf.io/module-image-mount"] == "copy"
    pod = job["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["module-image"] == {"name": "module-image", "emptyDir": {}}
    assert volumes["copier"] == {"name": "copier", "emptyDir": {}}
    assert not [v for v in pod["volumes"] if "image" in v]
    install, copy = pod["initContainers"]
    # Our image provides the copier; the module image only runs it.
    assert install["image"] == "captf:dev"
    assert install["args"] == ["install-copier", "/copier/captf-copy"]
    assert install["volumeMounts"] == [{"name": "copier", "mountPath": "/copier"}]
    # The module image by digest, with the source's pull policy.
    assert copy["image"] == f"registry.local/m@{DIGEST}"
    assert copy["imagePullPolicy"] == "Always"
    assert copy["command"] == ["/copier/captf-copy", "/captf", "/module-image/captf"]
    assert {m["name"]: m.get("readOnly") for m in copy["volumeMounts"]} == {
        "copier": True,
        "module-image": False,
    }
    for init in (install, copy):
        # The policy's resources and the restricted container context, as the runner's.
        assert init["resources"] == {"requests": {"cpu": "1"}}
        assert init["securityContext"]["allowPrivilegeEscalation"] is False
        assert init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert copy["securityContext"]["runAsUser"] == 65532


def test_the_copy_runs_as_the_policy_s_user_when_it_names_one() -> None:
    job = _job(COPY, {"podSecurityContext": {"runAsUser": 1000}})
    copy = job["spec"]["template"]["spec"]["initContainers"][1]
    assert "runAsUser" not in copy["securityContext"]


def test_the_volume_shape_has_no_init_containers() -> None:
    job = _job(VOLUME)
    pod = job["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    image = {"reference": f"registry.local/m@{DIGEST}", "pullPolicy": "Always"}
    assert {"name": "module-image", "image": image} in pod["volumes"]
    assert job["metadata"]["annotations"]["captf.io/module-image-mount"] == "volume"
