"""Fault injection against the real system: `python -m tests.chaos` (`make chaos`).

See docs/chaos.md for what it does and how to read its one-line JSON report."""
