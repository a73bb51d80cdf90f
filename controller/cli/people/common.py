"""What every people's command shares: one error line and exit status, and the live read."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from controller.cli.kinds import KindError
from controller.cli.live import Source
from controller.cli.snapshot_file import SnapshotError
from runtime.errors import ApiError, ConfigError

EXIT_REFUSED = 1  # the command understood the request and says why it will not do it
EXIT_BAD_INPUT = 2


class Refused(Exception):
    """The request is understood and not carried out; the message says why, in one line."""


def fail(command: str, message: str, status: int) -> int:
    print(f"captf {command}: {' '.join(message.split())}", file=sys.stderr)
    return status


def source_of(args: argparse.Namespace) -> Source:
    """Where a command for one object reads: its --kubeconfig, -n and --request-timeout."""
    return Source(
        kubeconfig=args.kubeconfig,
        namespace=args.namespace,
        request_timeout=args.request_timeout,
    )


Command = Callable[[argparse.Namespace], int]


def run_command(command: str, body: Command) -> Command:
    """A command's body with its errors turned into one line on stderr and an exit status."""

    def call(args: argparse.Namespace) -> int:
        try:
            return body(args)
        except (KindError, ConfigError) as err:
            return fail(command, str(err), EXIT_BAD_INPUT)
        except Refused as err:
            return fail(command, str(err), EXIT_REFUSED)
        except SnapshotError as err:  # the live read: not found, unreachable
            return fail(command, str(err), EXIT_REFUSED)
        except ApiError as err:
            return fail(command, f"the API server refused: {err}", EXIT_REFUSED)
        except OSError as err:
            return fail(command, f"cannot reach the API server: {err}", EXIT_REFUSED)

    return call
