"""What `captf state push` refuses before it writes anything (controller/cli/people/state.py)."""

from __future__ import annotations

import json

import pytest

from controller.cli.people.state import check_push
from controller.runner.state import StoredState


def tfstate(serial: int, lineage: str = "L", names: tuple[str, ...] = ("a",)) -> bytes:
    resources = [{"type": "terraform_data", "name": n} for n in names]
    return json.dumps({"serial": serial, "lineage": lineage, "resources": resources}).encode()


CURRENT = StoredState(tfstate(4, names=("a", "b")), 4, "h", {"metadata": {}})


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (tfstate(5), None),
        (CURRENT.data, None),  # the same state: nothing changes
        (tfstate(3), "below the current serial 4"),
        (tfstate(4), "is the current one, with other content"),
        (tfstate(9, lineage="M"), "lineage 'M' is not the current state's 'L'"),
        (b"{not json", "not JSON"),
        (b'{"lineage": "L"}', "no readable serial"),
        (b'{"serial": "5", "lineage": "L"}', "is not an integer"),
    ],
)
def test_a_push_is_checked_against_the_current_state(data: bytes, said: str | None) -> None:
    found = check_push(CURRENT, data)
    if said is None:
        assert found is None
    else:
        assert found is not None
        assert said in found


def test_the_first_state_needs_only_to_be_a_state() -> None:
    assert check_push(None, tfstate(1, lineage="any")) is None
    assert check_push(None, b"[]") is not None
