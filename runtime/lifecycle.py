"""`async with` for components whose whole lifecycle is one `running()` context manager.

The component writes `running()` once, as an @asynccontextmanager (start its tasks,
yield itself, stop them); this mixin makes `async with component:` enter and leave
exactly that. Nothing starts in a constructor."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Self


class RunsInContext:
    _lifecycle: AbstractAsyncContextManager[Self] | None = None

    def running(self) -> AbstractAsyncContextManager[Self]:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._lifecycle = self.running()
        return await self._lifecycle.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._lifecycle is not None, "__aexit__ without __aenter__"
        lifecycle, self._lifecycle = self._lifecycle, None
        return await lifecycle.__aexit__(exc_type, exc, tb)
