"""The I/O edge of CAPTF: the reconciler that applies the core's decisions."""
