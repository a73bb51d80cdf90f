"""Paginated lists: following continue tokens, and restarting when one expires."""

from __future__ import annotations

import pytest

from runtime.cache import list_all
from runtime.errors import ApiError
from tests.unit.runtime.scripted_api import ScriptedApi, gone, obj, page

PATH = "/apis/batch/v1/jobs"


def names(objects: list[dict[str, object]]) -> list[str]:
    return [o["metadata"]["name"] for o in objects]  # type: ignore[index]


async def test_pages_are_followed_without_a_resource_version_next_to_the_token() -> None:
    api = ScriptedApi(
        lists=[
            page([obj("a", 1), obj("b", 2)], rv=50, token="t1"),
            page([obj("c", 3), obj("d", 4)], rv=50, token="t2"),
            page([obj("e", 5)], rv=50),
        ]
    )
    listed = await list_all(api, PATH, resource_version="", selectors={}, page_size=2)
    assert names(listed.objects) == ["a", "b", "c", "d", "e"]
    assert listed.resource_version == "50"
    assert api.params_of("list") == [
        {"limit": "2"},
        {"limit": "2", "continue": "t1"},
        {"limit": "2", "continue": "t2"},
    ]


async def test_list_items_get_the_kind_and_api_version_of_their_list() -> None:
    api = ScriptedApi(lists=[page([obj("a", 1)], rv=5)])
    listed = await list_all(api, PATH, resource_version="0", selectors={})
    assert (listed.objects[0]["kind"], listed.objects[0]["apiVersion"]) == ("Job", "batch/v1")


async def test_an_expired_continue_token_restarts_the_list_from_a_fresh_snapshot() -> None:
    api = ScriptedApi(
        lists=[
            page([obj("a", 1)], rv=50, token="t1"),
            gone(),
            page([obj("a", 1)], rv=90, token="t9"),
            page([obj("c", 80)], rv=90),
        ]
    )
    listed = await list_all(
        api, PATH, resource_version="0", selectors={"labelSelector": "k=v"}, page_size=1
    )
    assert names(listed.objects) == ["a", "c"]
    assert listed.resource_version == "90"
    assert api.params_of("list") == [
        {"labelSelector": "k=v", "limit": "1", "resourceVersion": "0"},
        {"labelSelector": "k=v", "limit": "1", "continue": "t1"},
        {"labelSelector": "k=v", "limit": "1"},
        {"labelSelector": "k=v", "limit": "1", "continue": "t9"},
    ]


async def test_tokens_that_keep_expiring_give_up_with_the_410() -> None:
    api = ScriptedApi(lists=[x for _ in range(5) for x in (page([], rv=1, token="t"), gone())])
    with pytest.raises(ApiError) as failure:
        await list_all(api, PATH, resource_version="", selectors={})
    assert failure.value.status == 410
    assert len(api.params_of("list")) == 8


async def test_other_errors_are_not_swallowed() -> None:
    api = ScriptedApi(lists=[ApiError(403, "Forbidden", "no")])
    with pytest.raises(ApiError, match="Forbidden"):
        await list_all(api, PATH, resource_version="0", selectors={})
