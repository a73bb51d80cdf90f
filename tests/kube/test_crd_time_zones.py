"""A change window's timeZone at admission: every zone of the database is accepted, the
database's folders and names no zone has are refused. What admission cannot refuse
(a name the pattern admits that no zone has) DecideOp reports as JobPolicyInvalid."""

from __future__ import annotations

import zoneinfo

import pytest

from runtime.envtest import ApiServer
from tests.kube.test_manifests import KINDS, create, minimal, rejection


def _with_zone(kind: str, zone: str) -> dict[str, object]:
    obj = minimal(kind)
    obj["spec"]["changeWindows"] = [{"start": "22:00", "duration": "2h", "timeZone": zone}]
    return obj


@pytest.mark.kube
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_zone_of_the_database_is_accepted(
    apiserver: ApiServer, namespace: str, kind: str
) -> None:
    # One dry-run create per zone would be ~600 requests; one object carries 32 windows.
    zones = sorted(zoneinfo.available_timezones())
    for start in range(0, len(zones), 32):
        batch = zones[start : start + 32]
        obj = minimal(kind)
        obj["spec"]["changeWindows"] = [
            {"start": "22:00", "duration": "2h", "timeZone": zone} for zone in batch
        ]
        created = create(apiserver, obj, namespace, dry_run=True)
        assert [w["timeZone"] for w in created["spec"]["changeWindows"]] == batch


@pytest.mark.kube
@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("America/Indiana", "is a folder of the time-zone database"),
        ("America/Argentina", "is a folder of the time-zone database"),
        ("Etc", "is a folder of the time-zone database"),
        ("US", "is a folder of the time-zone database"),
        ("../etc/passwd", "spec.changeWindows[0].timeZone"),
        ("Europe/-Berlin", "spec.changeWindows[0].timeZone"),
        ("5Europe", "spec.changeWindows[0].timeZone"),
        ("zone.tab", "spec.changeWindows[0].timeZone"),
    ],
)
def test_folders_and_paths_are_refused(
    apiserver: ApiServer, namespace: str, zone: str, expected: str
) -> None:
    error = rejection(lambda: create(apiserver, _with_zone("TerraformMachine", zone), namespace))
    assert expected in error.message
