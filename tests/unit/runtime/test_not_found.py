"""`is_not_found`: a 404 whose Status names the object itself, nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.errors import ApiError, is_not_found

GROUP, PLURAL, NAME = "example.io", "widgets", "w1"


def _not_found(details: Any, code: int = 404) -> ApiError:
    status = {"kind": "Status", "code": code, "reason": "NotFound"}
    return ApiError.from_status(status if details is None else status | {"details": details})


@pytest.mark.parametrize(
    ("error", "gone"),
    [
        (_not_found({"group": GROUP, "kind": PLURAL, "name": NAME}), True),
        (_not_found({"group": GROUP, "kind": PLURAL, "name": "w2"}), False),
        (_not_found({"group": GROUP, "kind": "gadgets", "name": NAME}), False),
        (_not_found({"kind": PLURAL, "name": NAME}), False),  # the core group's widgets
        (_not_found({"group": GROUP, "kind": PLURAL, "name": NAME}, code=410), False),
        (_not_found(None), False),  # a 404 from a proxy names nothing
        (_not_found("not a mapping"), False),
        (ValueError("404"), False),
    ],
)
def test_only_a_404_naming_the_object_says_it_is_gone(error: Exception, gone: bool) -> None:
    assert is_not_found(error, group=GROUP, plural=PLURAL, name=NAME) is gone
