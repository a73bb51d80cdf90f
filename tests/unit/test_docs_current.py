"""The operator docs describe the product the code and manifests make, not an older one
(issue 26, item 10): the CRDs the install holds, the spec fields that exist, the
features that are here, and what a destroy leaves; and where two pages (or two parts of
one) spoke of the same rule, they say one thing, the code's (issue 37, item 9)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from controller.core.basics.names import MACHINE
from controller.core.decide import snapshot
from controller.core.decide.decision import to_json
from controller.core.decide.steps import decide
from controller.core.jobs.readings import Reading
from controller.io import metrics_set
from controller.lint.image_rules import IMAGE_RULES
from controller.runner.state import StateStore
from runtime.jsonobj import Json
from tests.builders import NOW, ago, job
from tests.paths import REPO
from tests.unit.core.decide.test_schedule import _member, _with_cluster

DOCS = REPO / "docs"
COUNTS = {
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}


def _crds() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((REPO / "manifests" / "kustomization.yaml").read_text())
    paths = [REPO / "manifests" / p for p in kustomization["resources"] if p.startswith("crds/")]
    return [yaml.safe_load(p.read_text()) for p in paths]


def _spec_fields(crd: dict[str, Any]) -> set[str]:
    """The spec fields of every version the CRD serves."""
    return {
        field
        for version in crd["spec"]["versions"]
        for field in version["schema"]["openAPIV3Schema"]["properties"]
        .get("spec", {})
        .get("properties", {})
    }


def test_the_install_names_every_crd_it_installs() -> None:
    text = (DOCS / "api.md").read_text()
    said = re.search(r"installs the (\w+) CRDs", text)
    assert said is not None
    crds = _crds()
    assert COUNTS[said.group(1)] == len(crds)
    kinds = {crd["spec"]["names"]["kind"] for crd in crds}
    install = text[said.start() : text.index("\n\n", said.start())]
    for kind in kinds - {"TerraformCluster", "TerraformMachinePool", "TerraformMachine"}:
        assert f"`{kind}`" in install or kind.endswith("Template"), kind
    assert "three templates" in install


@pytest.mark.parametrize("field", ["module", "clusterRef", "poolRef"])
@pytest.mark.parametrize("page", ["api.md", "clusterapi.md", "controller.md"])
def test_no_page_names_a_spec_field_the_crds_no_longer_have(field: str, page: str) -> None:
    assert all(field not in _spec_fields(crd) for crd in _crds())
    text = (DOCS / page).read_text()
    assert f"spec.{field}" not in text
    assert f"`{field}`" not in text


def test_clusterapi_md_describes_approvals_identities_and_module_images_as_they_are() -> None:
    kinds = {crd["spec"]["names"]["kind"]: crd for crd in _crds()}
    assert {"TerraformPlan", "TerraformClusterIdentity"} <= set(kinds)
    cluster = kinds["TerraformCluster"]
    [version] = [v for v in cluster["spec"]["versions"] if v["storage"]]
    source = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["source"]
    assert "image" in source["properties"]
    text = (DOCS / "clusterapi.md").read_text()
    assert "later work" not in text
    for named in ("`TerraformPlan`", "`TerraformClusterIdentity`", "`spec.source.image`"):
        assert named in text
    for link in ("api.md#terraformplan", "api.md#identities", "module-image.md"):
        assert f"({link}" in text


def test_runner_md_says_a_successful_destroy_removes_the_state() -> None:
    assert callable(StateStore.remove)  # the runner's removal after a destroy
    text = " ".join((DOCS / "runner.md").read_text().split())
    assert "operator's decision" not in text
    assert "A destroy that succeeded removes them itself, the backups first" in text


# -- issue 37, item 9: statements that contradicted each other, held to the code ---------


def _said(page: str) -> str:
    """The page with its line breaks folded, as a reader reads it."""
    return " ".join((DOCS / page).read_text().split())


def _row(page: str, step: str) -> str:
    """The `when` cell of DecideOp's step `step` in the page's step table."""
    for line in (DOCS / page).read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and cells[2] == f"`{step}`":
            return cells[4]
    raise AssertionError(f"{page} has no step table row for {step}")


def _reason_after(reading: Json | None) -> str:
    """The reason a Ready machine decides 10 minutes after a refresh read `reading` (an
    apply read it running and healthy before)."""
    applied = {"stateSerial": 1, "contract": {"pending": [], "health": "running"}}
    result = {"stateSerial": 1} | ({"contract": reading} if reading is not None else {})
    jobs = [
        job("apply", 1, owner="m1", kind=MACHINE, finished=ago(minutes=20), result=applied),
        job("refresh", 1, owner="m1", kind=MACHINE, finished=ago(minutes=10), result=result),
    ]
    reason: str = to_json(decide(snapshot.build(_member(), _with_cluster(*jobs)), NOW))["reason"]
    return reason


# What a refresh may read: the health's state (None: the output null), the outputs pending.
READINGS: dict[str, Json | None] = {
    "pending": {"pending": [], "health": "pending"},
    "null": {"pending": ["health"], "health": None},
    "unknown": {"pending": [], "health": "unknown"},
    "running": {"pending": [], "health": "running", "healthy": True},
    "stopped": {"pending": [], "health": "stopped"},
    "another output pending": {"pending": ["addresses"], "health": "running"},
    "no reading": None,
}


def test_one_statement_of_which_step_reads_which_health() -> None:
    """The step table's health_pending and health_watch rows, the issue 30 section of
    decisions.md and clusterapi.md say the same: HealthPending takes a pending or null
    health, the health watch every other reading. Which one does is decided here, not
    assumed."""
    by_step = {name: _reason_after(reading) for name, reading in READINGS.items()}
    pending = {name for name, reason in by_step.items() if reason == "HealthPending"}
    assert pending == {"pending", "null"}
    assert set(by_step.values()) == {"HealthPending", "HealthCheckDue"}
    assert "the newest contract reading's health is pending or null" in _row(
        "decisions.md", "health_pending"
    )
    watch = _row("decisions.md", "health_watch")
    assert "read a health that is neither pending nor null" in watch
    assert "read a definite health" not in watch
    decisions, clusterapi = _said("decisions.md"), _said("clusterapi.md")
    assert "Now only a pending or null health hands the schedule to `HealthPending`" in decisions
    assert "While the newest reading's health is pending or null, `HealthPending`'s" in clusterapi


NULL_HEALTH = (
    "A null health is pending for the schedule (the contract's null: a value still to "
    "come) and tells nothing toward the remediation mark (neither unhealthy nor an end of "
    "the row)."
)


def test_one_statement_of_whether_a_null_health_is_pending() -> None:
    null = Reading(("health",), None)
    assert null.health_pending  # the schedule's
    assert null.told is None  # the mark's: passed over
    assert _reason_after({"pending": ["health"], "health": None}) == "HealthPending"
    for page in ("clusterapi.md", "decisions.md"):
        assert NULL_HEALTH in _said(page), page
    # What clusterapi.md said before: a null health read on the watch's interval.
    assert "(`unknown`, a null health, a result without a reading)" not in _said("clusterapi.md")


def test_lint_md_calls_not_implemented_only_rules_that_are_not() -> None:
    text = _said("lint.md")
    clauses = re.findall(r"([^.;]*) (?:is|are) not implemented", text)
    missing = [rule for clause in clauses for rule in re.findall(r"`(image-[a-z-]+)`", clause)]
    assert missing  # the public linter's rules left out
    assert not set(missing) & set(IMAGE_RULES), missing
    table = (DOCS / "lint.md").read_text()
    for rule in IMAGE_RULES:
        assert f"| `{rule}` |" in table, rule


class _NoObjects:
    """Stores with nothing cached: the per-object collector registers its names alone."""

    def by_kind(self) -> dict[str, list[Json]]:
        return {}

    def own_secret(self, namespace: str, name: str) -> Json | None:
        return None

    def jobs_of(self, uid: str) -> list[Json]:
        return []


def test_observability_md_names_every_captf_metric_the_controller_registers() -> None:
    """Both ways: a metric registered and not documented (captf_remediation_requests_total
    was new with issue 37), or documented and not registered."""
    registry = CollectorRegistry()
    metrics_set.register(registry, _NoObjects(), names=True, longest_pause=lambda: 0.0)
    exported = metrics_set.exported(registry)
    ours = {f.name for f in registry.collect() if f.name.startswith("captf_")}
    said = set(re.findall(r"`(captf_[a-z_]+)", (DOCS / "observability.md").read_text()))
    assert "captf_remediation_requests" in ours
    for name in ours:
        assert name in said or f"{name}_total" in said, name
    assert said <= exported | ours, sorted(said - exported - ours)
