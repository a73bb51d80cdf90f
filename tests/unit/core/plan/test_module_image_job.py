"""A module image source: the inputs carry its reference, and the Job mounts it."""

from __future__ import annotations

from controller.core.basics.runner_vars import RunnerVar
from controller.core.decide.context import read_spec
from controller.core.decide.decision import Run, to_json
from controller.core.decide.facts import Facts
from controller.core.decide.snapshot import build
from controller.core.decide.steps import decide
from controller.core.plan import jobspec
from controller.core.spec.image import Resolved
from controller.core.spec.inputs import Inputs, inputs_hash, render
from controller.core.spec.inputs_secret import IMAGE_KEY
from controller.core.spec.policy import OPEN, read_policy
from controller.core.spec.refs import ModuleImage
from runtime.jsonobj import Json
from tests.builders import (
    NOW,
    capi_cluster,
    captf,
    decided,
    module_configmap,
    secret,
    state,
)


def _image_spec(reference: str = "registry.local/m:1", policy: str | None = None) -> Json:
    source: Json = {"image": reference}
    if policy:
        source["imagePullPolicy"] = policy
    return {"source": source, "variables": {"size": 1}, "jobs": {"image": "captf:dev"}}


def _job(spec: Json) -> Json:
    obj = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "TerraformCluster",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
        "spec": spec,
    }
    inputs = render(spec, {"m": module_configmap("m")}, {})
    run = Run(op="apply", reason="NoState", retry=1)
    return jobspec.build_job(
        obj, run, inputs=inputs, policy=read_policy(spec), seq=1, name="c-apply-1"
    )


def test_an_image_source_renders_no_module_files_and_names_the_image() -> None:
    inputs = render(_image_spec(policy="Always"), {}, {})
    assert inputs.module == {}
    assert inputs.image == ModuleImage("registry.local/m:1", "Always")
    data = inputs.secret_data()
    assert data[IMAGE_KEY] == b"registry.local/m:1"
    assert not [key for key in data if key.startswith("module.")]


def test_a_new_reference_is_new_inputs_and_a_new_pull_policy_is_not() -> None:
    first = render(_image_spec("r/m:1"), {}, {})
    assert render(_image_spec("r/m:2"), {}, {}).hash != first.hash
    assert render(_image_spec("r/m:1", "Always"), {}, {}).hash == first.hash
    assert first.hash == inputs_hash({}, {"size": 1}, image="r/m:1")


def test_a_configmap_source_hashes_as_before_images_existed() -> None:
    spec = {"source": {"configMapRef": {"name": "m"}}, "variables": {"size": 1}}
    cm = module_configmap("m", {"main.tf": "# m\n"})
    inputs = render(spec, {"m": cm}, {})
    assert inputs.image is None
    assert inputs.hash == inputs_hash({"main.tf": "# m\n"}, {"size": 1})
    assert IMAGE_KEY not in inputs.secret_data()


def test_the_job_mounts_the_module_image_read_only_and_tells_the_runner_where() -> None:
    pod = _job(_image_spec(policy="Always"))["spec"]["template"]["spec"]
    volume = {
        "name": "module-image",
        "image": {"reference": "registry.local/m:1", "pullPolicy": "Always"},
    }
    assert volume in pod["volumes"]
    [container] = pod["containers"]
    mount = {"name": "module-image", "mountPath": "/module-image", "readOnly": True}
    assert mount in container["volumeMounts"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # The volume holds the image's filesystem; the contract's paths are under its /captf.
    assert env[RunnerVar.MODULE_IMAGE_DIR.value] == "/module-image/captf"


def test_a_configmap_source_job_has_no_image_volume() -> None:
    spec = {"source": {"configMapRef": {"name": "m"}}, "jobs": {"image": "captf:dev"}}
    pod = _job(spec)["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}]
    [container] = pod["containers"]
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert RunnerVar.MODULE_IMAGE_DIR.value not in {e["name"] for e in container["env"]}


def _resolved(obj: Json, others: list[Json]) -> Json:
    """The decision once the registry answered the lookup the pass asked for: before it,
    a tag's Job waits ImageResolving (controller/core/decide/holds.py)."""
    reference = obj["spec"]["source"]["image"]
    answer = Resolved(reference, "sha256:" + "ab" * 32, 1, None)
    return to_json(decide(build(obj, others), NOW, facts=Facts(image=answer)))


def test_an_image_source_applies_without_a_module_configmap_and_again_on_a_new_tag() -> None:
    obj = captf()
    obj["spec"]["source"] = {"image": "r/m:1"}
    others = [capi_cluster("c1"), secret("creds", {"token": "t"})]
    assert _resolved(obj, others)["reason"] == "InputsChanged"
    # A TerraformCluster's image is a role module: its inputs carry the contract's.
    inputs = read_spec(build(obj, others), OPEN).inputs
    assert isinstance(inputs, Inputs)
    assert inputs.contract is not None
    applied = [*others, state("c1", serial=1, inputs=inputs.hash)]
    assert decided(obj, applied)["action"] != "run"
    obj["spec"]["source"] = {"image": "r/m:2"}
    assert _resolved(obj, applied)["reason"] == "InputsChanged"
