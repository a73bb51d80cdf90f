"""Json: a JSON object as the API server sends and takes it, decoded: the one alias
every module of the runtime, the controller and the tests uses.

It names a type and has no behaviour, so the decision core may import it too
(pyproject.toml's import contracts make it the core's one exception to "no runtime")."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]
