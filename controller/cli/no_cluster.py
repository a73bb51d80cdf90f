"""What a command that talks to a cluster says when there is none to talk to: one line
on stderr and exit 2. Shared by the program's entry (entry.py, for `captf runner`) and
the full command line (main.py), so neither imports the other for it."""

from __future__ import annotations

import sys

from runtime.errors import ConfigError


def no_cluster(err: ConfigError) -> int:
    print(f"captf: no cluster to talk to: {' '.join(str(err).split())}", file=sys.stderr)
    return 2
