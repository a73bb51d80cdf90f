"""Benchmarks: `captf bench watch` and `captf bench scale`. Never imported by the controller."""
