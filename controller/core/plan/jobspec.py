"""The Jobs and durable inputs Secrets the controller creates, built as plain dicts.

Job names are deterministic: `<name>-<op>-<hash8>` with hash8 taken from
(uid, op, attempt sequence). The same decision made twice, before the cache
shows the first Job, names the same Job, and the API server refuses the second
create: no Job is ever created twice."""

from __future__ import annotations

import copy

from controller.core.basics.names import (
    ANN_DRIFT_REMEDIATION,
    ANN_GUARDED,
    ANN_INPUTS_HASH,
    ANN_MODULE_IMAGE,
    ANN_MODULE_IMAGE_DIGEST,
    ANN_MODULE_IMAGE_MOUNT,
    ANN_PLAN_JOB,
    ANN_POLICY_HASH,
    ANN_RESTORE_SERIAL,
    ANN_RETRY,
    ANN_SEQ,
    LABEL_CLUSTERCTL_MOVE,
    LABEL_KIND,
    LABEL_NAME,
    LABEL_OP,
    LABEL_UID,
    MANAGED_BY,
    Op,
    inputs_secret_prefix,
    state_secret_name,
)
from controller.core.basics.ops import traits
from controller.core.basics.runner_vars import RunnerVar
from controller.core.decide.decision import Run
from controller.core.jobs.termination import JOB_UID_LABEL, TERMINATION_MESSAGE_PATH
from controller.core.spec import inputs_secret as inputs_secret_codec
from controller.core.spec.inputs import Inputs
from controller.core.spec.module_mount import MODULE_IMAGE_DIR, VOLUME, module_mount
from controller.core.spec.plan_policies import PolicySet
from controller.core.spec.policy import Policy
from controller.core.spec.refs import credentials_of, spec_of
from runtime.jsonobj import Json

# The credentials Secret as files, beside its keys as environment variables: one file per
# key, readable by the runner's group only (the pod's fsGroup), never writable.
CREDENTIALS_VOLUME = "credentials"
CREDENTIALS_MOUNT = "/var/run/captf/credentials"
CREDENTIALS_MODE = 0o440
# The runner image's group (Dockerfile: uid and gid 65532): the kubelet gives the
# credentials files this group, and the runner's process is in it.
RUNNER_GROUP = 65532


def inputs_secret_name(obj: Json, inputs: Inputs) -> str:
    """`<name>-<kind>-<key>-inputs-<hash8>` (controller/core/basics/names.py)."""
    meta = obj["metadata"]
    return f"{inputs_secret_prefix(meta['namespace'], obj['kind'], meta['name'])}{inputs.hash8}"


def state_secret_of(obj: Json) -> str:
    meta = obj["metadata"]
    return state_secret_name(meta["namespace"], obj["kind"], meta["name"])


def plan_secret_name(plan_job: str) -> str:
    """A plan Job writes its plan to a Secret of its own name (Job names are unique)."""
    return plan_job


def owner_reference(obj: Json, *, controller: bool = True) -> Json:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def object_labels(obj: Json) -> dict[str, str]:
    meta = obj["metadata"]
    return {LABEL_KIND: obj["kind"], LABEL_NAME: meta["name"], LABEL_UID: meta["uid"]}


def inputs_secret(obj: Json, inputs: Inputs) -> Json:
    """The immutable durable inputs Secret; its name carries the inputs hash."""
    meta = obj["metadata"]
    data = inputs_secret_codec.secret_data(inputs.carried())
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": inputs_secret_name(obj, inputs),
            "namespace": meta["namespace"],
            "labels": object_labels(obj) | MANAGED_BY | {LABEL_CLUSTERCTL_MOVE: ""},
            "annotations": {ANN_INPUTS_HASH: inputs.hash},
            "ownerReferences": [owner_reference(obj, controller=False)],
        },
        "type": "Opaque",
        "immutable": True,
        "data": data,
    }


def build_job(
    obj: Json,
    run: Run,
    *,
    inputs: Inputs,
    policy: Policy,
    seq: int,
    name: str,
    credentials: str | None = None,
    mount: str = VOLUME,
    policies: PolicySet | None = None,
) -> Json:
    """`credentials`: the Secret in the object's namespace the runner gets as environment
    and files (controller/core/spec/identity.py's `credentials_secret`); None reads the
    object's own reference. `mount`: how a module image reaches the runner, `volume` or
    `copy` (controller/core/spec/module_mount.py). `policies`: the policy set an apply or
    a plan judges its plan with (the Job records its hash)."""
    meta = obj["metadata"]
    cred = credentials_of(spec_of(obj)) if credentials is None else credentials
    notes = {ANN_RETRY: str(run.retry), ANN_SEQ: str(seq), ANN_INPUTS_HASH: inputs.hash}
    if run.drift_remediation:
        notes[ANN_DRIFT_REMEDIATION] = "true"
    if run.guarded:
        notes[ANN_GUARDED] = "true"
    if run.restore_serial:
        notes[ANN_RESTORE_SERIAL] = run.restore_serial
    if run.plan_job:
        notes[ANN_PLAN_JOB] = run.plan_job
    judged = policies if run.op in JUDGED_OPS else None
    if judged is not None:
        notes[ANN_POLICY_HASH] = judged.hash
    if inputs.image is not None:
        # The reference as the spec named it (the volume names the digest): status.image.
        notes[ANN_MODULE_IMAGE] = inputs.image.reference
        if inputs.image.digest:
            notes[ANN_MODULE_IMAGE_DIGEST] = inputs.image.digest
        notes[ANN_MODULE_IMAGE_MOUNT] = mount
    job: Json = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": object_labels(obj) | {LABEL_OP: run.op},
            "annotations": notes,
            "ownerReferences": [owner_reference(obj)],
        },
        "spec": _job_spec(
            obj, run, inputs=inputs, policy=policy, name=name, cred=cred, mount=mount
        ),
    }
    if judged is not None:
        [container] = job["spec"]["template"]["spec"]["containers"]
        container["env"].append({"name": RunnerVar.POLICIES.value, "value": _policy_env(judged)})
    return job


# The ops whose plan is judged: an apply (before it applies) and a Manual plan.
JUDGED_OPS = frozenset({Op.APPLY, Op.PLAN})
# What a Job carries in place of a set too large for its environment (the decision waits
# PolicyDenied before that happens): the runner cannot read it, and denies.
TOO_LARGE = "too-large"


def _policy_env(policies: PolicySet) -> str:
    return TOO_LARGE if policies.too_large() else policies.encode()


def _job_spec(
    obj: Json, run: Run, *, inputs: Inputs, policy: Policy, name: str, cred: str, mount: str
) -> Json:
    volumes: list[Json] = [{"name": "tmp", "emptyDir": {}}]
    if cred:
        secret = {"secretName": cred, "defaultMode": CREDENTIALS_MODE}
        volumes.append({"name": CREDENTIALS_VOLUME, "secret": secret})
    # The restricted Pod Security profile, with whatever the policy adds to it.
    # Copies: the policy's values may be the compiled defaults or the cached objects'.
    pod_policy = copy.deepcopy(policy.pod)
    context: Json = pod_policy.pod_security_context
    if cred:
        context.setdefault("fsGroup", RUNNER_GROUP)
    container = _container(obj, run, inputs=inputs, name=name, cred=cred)
    shared = {"resources": pod_policy.resources, "securityContext": pod_policy.security_context}
    container |= copy.deepcopy(shared)
    if pod_policy.env:
        # Before the runner's own: the names may not collide (the webhook and InvalidSpec
        # refuse the runner's), and were one to, the runner's later entry would win.
        container["env"] = [*pod_policy.env, *container["env"]]
    pod: Json = {"restartPolicy": "Never"}
    if inputs.image is not None:
        # The module image's files, read-only, at the same path in either shape; nothing
        # of the image runs but the copier of the copy shape. By digest once one is
        # known: what ran is known by construction.
        shape = module_mount(
            inputs.image,
            mount,
            runner_image=container["image"],
            container=shared,
            pod_context=context,
        )
        volumes += shape.volumes
        container["volumeMounts"].append(shape.runner_mount)
        if shape.init_containers:
            pod["initContainers"] = list(shape.init_containers)
    pod |= {
        "containers": [container],
        "volumes": volumes,
        "securityContext": context,
        **pod_policy.pod_fields(),
    }
    if policy.service_account:
        pod["serviceAccountName"] = policy.service_account
    return {
        "backoffLimit": 0,
        "activeDeadlineSeconds": policy.active_deadline,
        # An evicted or preempted runner fails its Job with reason PodFailurePolicy,
        # recognisable even when the runner died before writing a result.
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailJob",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                }
            ]
        },
        "template": {"metadata": {"labels": object_labels(obj) | {LABEL_OP: run.op}}, "spec": pod},
    }


# The Job's uid, which the API server puts in the labels of the Job's pod template.
_JOB_UID: Json = {
    "name": RunnerVar.JOB_UID.value,
    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_UID_LABEL}']"}},
}


def _container(obj: Json, run: Run, *, inputs: Inputs, name: str, cred: str) -> Json:
    meta, spec = obj["metadata"], spec_of(obj)
    env = {
        RunnerVar.OP: run.op,
        RunnerVar.NAMESPACE: meta["namespace"],
        RunnerVar.JOB_NAME: name,
        RunnerVar.OBJECT_NAME: meta["name"],
        RunnerVar.OBJECT_KIND: obj["kind"],
        RunnerVar.INPUTS_SECRET: inputs_secret_name(obj, inputs),
        RunnerVar.INPUTS_HASH: inputs.hash,
        RunnerVar.STATE_SECRET: state_secret_of(obj),
        RunnerVar.GUARDED: "true" if run.guarded else "false",
        RunnerVar.WORK_DIR: "/tmp",
        RunnerVar.RESULT_FILE: TERMINATION_MESSAGE_PATH,
    }
    if traits(run.op).keeps_plan:
        # An apply keeps the plan it stops on (blocked, changed) under its own name.
        env[RunnerVar.PLAN_SECRET] = plan_secret_name(name)
    if run.op == Op.APPLY and run.plan_job:
        env[RunnerVar.APPROVED_PLAN_SECRET] = plan_secret_name(run.plan_job)
    if run.op == Op.APPLY and run.plan_fingerprint:
        env[RunnerVar.APPROVED_FINGERPRINT] = run.plan_fingerprint
    if run.op == Op.RESTORE and run.restore_serial:
        env[RunnerVar.RESTORE_SERIAL] = run.restore_serial
    outputs = spec.get("outputs") or {}
    if run.op == Op.APPLY and outputs.get("secretName"):
        # The runner writes the outputs Secret after a successful apply, owned by the object.
        env[RunnerVar.OUTPUTS_SECRET] = str(outputs["secretName"])
        env[RunnerVar.OBJECT_UID] = str(meta.get("uid", ""))
        if outputs.get("names") is not None:
            env[RunnerVar.OUTPUTS_NAMES] = ",".join(str(n) for n in outputs["names"])
    # Names only: the runner reads the values itself, to redact them from what it writes.
    if cred:
        env[RunnerVar.CREDENTIALS_SECRET] = cred
        env[RunnerVar.CREDENTIALS_DIR] = CREDENTIALS_MOUNT
    if inputs.secret_names:
        env[RunnerVar.SECRET_VARIABLES] = ",".join(sorted(inputs.secret_names))
    mounts: list[Json] = [{"name": "tmp", "mountPath": "/tmp"}]
    if cred:
        mounts.append(
            {"name": CREDENTIALS_VOLUME, "mountPath": CREDENTIALS_MOUNT, "readOnly": True}
        )
    if inputs.image is not None:
        env[RunnerVar.MODULE_IMAGE_DIR] = MODULE_IMAGE_DIR
    container: Json = {
        "name": "runner",
        "image": (spec.get("jobs") or {}).get("image", ""),
        "args": ["runner"],
        "env": [{"name": k.value, "value": v} for k, v in env.items()] + [_JOB_UID],
        "volumeMounts": mounts,
        # The result channel: only this container can write its termination message, and
        # only the kubelet carries it to the pod's status (controller/core/jobs/termination.py).
        "terminationMessagePath": TERMINATION_MESSAGE_PATH,
        "terminationMessagePolicy": "File",
    }
    if cred:
        container["envFrom"] = [{"secretRef": {"name": cred}}]
    return container
