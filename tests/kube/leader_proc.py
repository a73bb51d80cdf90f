"""One leader-election candidate as its own process, for the failover tests.

    python -m tests.kube.leader_proc --kubeconfig K --namespace NS --name L --identity ID

Prints `LEADER <identity>` once it holds the Lease; SIGTERM (or SIGINT) leaves
the protected block cleanly, releasing the Lease, and prints `RELEASED`; a lost
Lease prints `LOST` and exits 1."""

from __future__ import annotations

import argparse
import signal
import sys

import anyio

from runtime.clock import LoopClock
from runtime.leader import LeaderLost, LeaderTimings, leader_election
from runtime.transport import open_transport


def _say(line: str) -> None:
    print(line, flush=True)


async def _main(args: argparse.Namespace) -> int:
    timings = LeaderTimings(
        lease_duration=args.lease, renew_deadline=args.renew, retry_period=args.retry
    )
    async with open_transport(args.kubeconfig) as transport:
        try:
            async with leader_election(
                transport,
                namespace=args.namespace,
                name=args.name,
                clock=LoopClock(),
                identity=args.identity,
                timings=timings,
            ) as leadership:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    _say(f"LEADER {leadership.identity}")
                    async for _ in signals:
                        break
        except LeaderLost:
            _say("LOST")
            return 1
    _say("RELEASED")
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--identity", required=True)
    p.add_argument("--lease", type=float, default=8.0)
    p.add_argument("--renew", type=float, default=5.0)
    p.add_argument("--retry", type=float, default=0.5)
    return anyio.run(_main, p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
