"""Linting what module authors publish: the I/O half (reading a module directory into
the facts the checks read). The checks themselves are pure and live in the core
(`controller.core.contract.lint`)."""
