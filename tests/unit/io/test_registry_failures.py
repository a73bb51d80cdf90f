"""What a failed crane call becomes: one of three kinds, with a message of the
controller's own that never repeats what the registry or crane said."""

from __future__ import annotations

import pytest

from controller.io.registry import _failure

REF = "reg.example:5000/team/mod:1"
SECRET = "hunter2-token"

CASES = [
    (
        "GET https://reg/v2/team/mod/manifests/1: MANIFEST_UNKNOWN: manifest unknown",
        "ImageNotFound",
    ),
    (
        "GET https://reg/v2/team/mod/manifests/1: NAME_UNKNOWN: repository name not known",
        "ImageNotFound",
    ),
    ("could not parse reference: reg//x", "ImageNotFound"),
    ("GET https://reg/v2/: UNAUTHORIZED: authentication required", "RegistryUnauthorized"),
    ("GET https://reg/token: unexpected status code 401 Unauthorized", "RegistryUnauthorized"),
    ("DENIED: requested access to the resource is denied", "RegistryUnauthorized"),
    (
        "GET https://reg/v2/: unexpected status code 500 Internal Server Error",
        "RegistryUnavailable",
    ),
    ("dial tcp 127.0.0.1:1: connect: connection refused", "RegistryUnavailable"),
]


@pytest.mark.parametrize(("said", "kind"), CASES)
def test_a_crane_failure_is_one_of_three_kinds(said: str, kind: str) -> None:
    failed = _failure(REF, f"{said} (token {SECRET})")
    assert failed.kind == kind
    assert REF in str(failed)
    assert SECRET not in str(failed)
    assert said not in str(failed)


def test_a_5xx_names_its_status() -> None:
    assert "HTTP 503" in str(_failure(REF, "unexpected status code 503 Service Unavailable"))
