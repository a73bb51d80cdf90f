"""The caches and their handlers on an in-memory API, shared by the io tests."""

from __future__ import annotations

import pytest

from controller.io.caches import Caches
from controller.io.handlers import wire_handlers
from runtime.clock import LoopClock
from tests.unit.io.cache_objects import Server


@pytest.fixture
def server() -> Server:
    return Server()


@pytest.fixture
def caches(server: Server) -> Caches:
    return Caches(server, clock=LoopClock(), namespace=None)


@pytest.fixture
def woken(caches: Caches) -> list[str]:
    keys: list[str] = []
    wire_handlers(caches, keys.append)
    return keys
